-- bucket: whole minutes since the session's open (14:30 generated) of the
-- trade's (UTC) day, floored to a multiple of 5; the average is over M's days (20 generated)
-- (ts as integer nanoseconds since the epoch; integer division).
SELECT sym,
       (CAST(ts AS BIGINT) % 86400000000000 / 60000000000 - $session_open_minute) / 5 * 5 AS bucket,
       sum(amount) / $m_day_count AS avg_volume
FROM trades
WHERE array_has($b_syms, sym) AND ts >= $m_start AND ts < $m_end
GROUP BY 1, 2
ORDER BY 1, 2;
