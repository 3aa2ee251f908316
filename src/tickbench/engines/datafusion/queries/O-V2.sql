SELECT date_bin(INTERVAL '1 hour', ts) AS bucket,
       avg(b1size + b2size + b3size + b4size + b5size) AS bid_depth,
       avg(a1size + a2size + a3size + a4size + a5size) AS ask_depth
FROM book
WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
GROUP BY bucket
ORDER BY bucket;
