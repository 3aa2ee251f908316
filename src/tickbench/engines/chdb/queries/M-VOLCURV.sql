-- bucket: whole minutes since 14:30 of the trade's UTC day, floored to a multiple of 5 (floor, not
-- intDiv's truncation, for a trade before the open); the average is over M's 20 days (SPEC: /20).
SELECT sym,
       toInt64(floor((intDiv(toUnixTimestamp64Nano(ts) % 86400000000000, 60000000000) - 870) / 5)) * 5 AS bucket,
       sum(amount) / 20 AS avg_volume
FROM trades
WHERE sym IN {b_syms:Array(String)}
  AND ts >= {m_start:DateTime64(6, 'UTC')} AND ts < {m_end:DateTime64(6, 'UTC')}
GROUP BY sym, bucket
ORDER BY sym, bucket
