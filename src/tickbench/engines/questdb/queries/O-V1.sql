SELECT ts AS bucket, avg(b1size) AS bid_depth, avg(a1size) AS ask_depth
FROM book
WHERE sym = $sym AND ts >= $week_start AND ts < $week_end
SAMPLE BY 1m FILL(NONE) ALIGN TO CALENDAR
ORDER BY bucket;
