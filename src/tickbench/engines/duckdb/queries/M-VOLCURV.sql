-- bucket: whole minutes since 14:30:00 of the trade's (UTC) day, floored to a multiple of 5.
SELECT sym,
       (epoch_ns(ts) % 86400000000000 // 60000000000 - 870) // 5 * 5 AS bucket,
       sum(amount) / 20 AS avg_volume
FROM trades
WHERE sym IN (SELECT unnest($b_syms)) AND ts >= $m_start AND ts < $m_end
GROUP BY sym, bucket
ORDER BY sym, bucket;
