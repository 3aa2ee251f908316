SELECT time_bucket('1 minute', ts) AS bucket,
       avg(b1size) AS bid_depth,
       avg(a1size) AS ask_depth
FROM book
WHERE sym = %(sym)s AND ts >= %(week_start)s AND ts < %(week_end)s
GROUP BY bucket
ORDER BY bucket;
