SELECT toStartOfInterval(ts, INTERVAL 1 MINUTE) AS bucket, sum(price * amount) / sum(amount) AS vwap
FROM trades
WHERE sym = {sym:String} AND ts >= {day_start:DateTime64(6, 'UTC')} AND ts < {day_end:DateTime64(6, 'UTC')}
GROUP BY bucket
ORDER BY bucket
