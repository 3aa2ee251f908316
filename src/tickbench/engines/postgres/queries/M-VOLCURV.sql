-- bucket: whole minutes since the session's 14:30:00 UTC (52,200 s after midnight) of the
-- trade's day, floored to a multiple of 5 (floor((s - 52200) / 300) * 5, s the seconds since its
-- UTC midnight); the average is over M's 20 trading days (SPEC §2.3).
SELECT sym,
       floor((extract(epoch FROM ts - date_bin('1 day', ts, TIMESTAMPTZ 'epoch')) - 52200) / 300)::bigint * 5
           AS bucket,
       sum(amount) / 20 AS avg_volume
FROM trades
WHERE sym = ANY(%(b_syms)s::text[]) AND ts >= %(m_start)s AND ts < %(m_end)s
GROUP BY sym, bucket
ORDER BY sym, bucket;
