-- bucket: whole minutes from the session's 14:30:00 UTC (870 min, a multiple of 5, after the
-- trade's UTC midnight) to the start of the trade's 5-minute bucket; the average is over M's 20
-- trading days (SPEC §2.3).
SELECT sym,
       (extract(epoch FROM time_bucket('5 minutes', ts) - time_bucket('1 day', ts))::bigint - 52200) / 60
           AS bucket,
       sum(amount) / 20 AS avg_volume
FROM trades
WHERE sym = ANY(%(b_syms)s::text[]) AND ts >= %(m_start)s AND ts < %(m_end)s
GROUP BY sym, bucket
ORDER BY sym, bucket;
