-- bucket: whole minutes since the session's open (14:30 generated) of the
-- trade's (UTC) day, floored to a multiple of 5; the average is over M's days (20 generated).
SELECT sym,
       (epoch_ns(ts) % 86400000000000 // 60000000000 - $session_open_minute) // 5 * 5 AS bucket,
       sum(amount) / $m_day_count AS avg_volume
FROM trades
WHERE sym IN (SELECT unnest($b_syms)) AND ts >= $m_start AND ts < $m_end
GROUP BY sym, bucket
ORDER BY sym, bucket;
