-- The bucket is whole minutes since the session's open of the trade's UTC day (ts's nanoseconds
-- into the day, in integer division), floored to 5; the average is over M's days.
SELECT sym, bucket, sum(amount) / $m_day_count AS avg_volume FROM (
    SELECT sym, (CAST(ts AS LONG) % 86400000000000 / 60000000000 - $session_open_minute) / 5 * 5 AS bucket, amount
    FROM trades
    WHERE ts >= $m_start AND ts < $m_end AND sym IN ($b_syms)
)
ORDER BY sym, bucket;
