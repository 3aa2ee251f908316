SELECT date_bin(INTERVAL '1 minute', ts) AS bucket,
       avg(b1size) AS bid_depth,
       avg(a1size) AS ask_depth
FROM book
WHERE sym = $sym AND ts >= $week_start AND ts < $week_end
GROUP BY bucket
ORDER BY bucket;
