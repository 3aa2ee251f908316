SELECT sym, side, toStartOfInterval(ts, INTERVAL 1 MINUTE) AS bucket, sum(amount) AS volume
FROM trades
WHERE ts >= {day_start:DateTime64(6, 'UTC')} AND ts < {day_end:DateTime64(6, 'UTC')}
GROUP BY sym, side, bucket
ORDER BY sym, side, bucket
