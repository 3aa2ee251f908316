-- bucket: whole minutes since 14:30:00 of the trade's (UTC) day, floored to a multiple of 5
-- (ts as integer nanoseconds since the epoch; integer division).
SELECT sym,
       (CAST(ts AS BIGINT) % 86400000000000 / 60000000000 - 870) / 5 * 5 AS bucket,
       sum(amount) / 20 AS avg_volume
FROM trades
WHERE array_has($b_syms, sym) AND ts >= $m_start AND ts < $m_end
GROUP BY 1, 2
ORDER BY 1, 2;
