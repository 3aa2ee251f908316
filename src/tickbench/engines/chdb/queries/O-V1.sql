SELECT toStartOfInterval(ts, INTERVAL 1 MINUTE) AS bucket,
       avg(b1size) AS bid_depth,
       avg(a1size) AS ask_depth
FROM book
WHERE sym = {sym:String} AND ts >= {week_start:DateTime64(6, 'UTC')} AND ts < {week_end:DateTime64(6, 'UTC')}
GROUP BY bucket
ORDER BY bucket
