-- bucket: whole minutes since the session's open (14:30 generated) of the trade's UTC day, floored
-- to a multiple of 5 (floor, not intDiv's truncation, for a trade before the open); the average
-- is over M's days (20 generated).
SELECT sym,
       toInt64(floor((intDiv(toUnixTimestamp64Nano(ts) % 86400000000000, 60000000000) - {session_open_minute:Int64}) / 5)) * 5 AS bucket,
       sum(amount) / {m_day_count:Int64} AS avg_volume
FROM trades
WHERE sym IN {b_syms:Array(String)}
  AND ts >= {m_start:DateTime64(6, 'UTC')} AND ts < {m_end:DateTime64(6, 'UTC')}
GROUP BY sym, bucket
ORDER BY sym, bucket
