-- The bucket is whole minutes since 14:30 of the trade's UTC day (ts's nanoseconds into the day),
-- floored to 5 (integer division); the average is over M's 20 days.
SELECT sym, bucket, sum(amount) / 20 AS avg_volume FROM (
    SELECT sym, (CAST(ts AS LONG) % 86400000000000 / 60000000000 - 870) / 5 * 5 AS bucket, amount
    FROM trades
    WHERE ts >= $m_start AND ts < $m_end AND sym IN ($b_syms)
)
ORDER BY sym, bucket;
