SELECT sym, side, ts AS bucket, sum(amount) AS volume
FROM trades
WHERE ts >= $day_start AND ts < $day_end
SAMPLE BY 1m FILL(NONE) ALIGN TO CALENDAR
ORDER BY sym, side, bucket;
