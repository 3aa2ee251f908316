SELECT ts AS bucket, sum(price * amount) / sum(amount) AS vwap
FROM trades
WHERE sym = $sym AND ts >= $day_start AND ts < $day_end
SAMPLE BY 1m FILL(NONE) ALIGN TO CALENDAR
ORDER BY bucket;
