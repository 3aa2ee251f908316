SELECT toStartOfInterval(ts, INTERVAL 1 HOUR) AS bucket,
       avg(b1size + b2size + b3size + b4size + b5size) AS bid_depth,
       avg(a1size + a2size + a3size + a4size + a5size) AS ask_depth
FROM book
WHERE sym = {sym:String} AND ts >= {month_start:DateTime64(6, 'UTC')} AND ts < {month_end:DateTime64(6, 'UTC')}
GROUP BY bucket
ORDER BY bucket
