SELECT time_bucket('1 hour', ts) AS bucket,
       avg(b1size + b2size + b3size + b4size + b5size) AS bid_depth,
       avg(a1size + a2size + a3size + a4size + a5size) AS ask_depth
FROM book
WHERE sym = %(sym)s AND ts >= %(month_start)s AND ts < %(month_end)s
GROUP BY bucket
ORDER BY bucket;
