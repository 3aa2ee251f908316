SELECT sym, side, time_bucket(INTERVAL '1 minute', ts) AS bucket, sum(amount) AS volume
FROM trades
WHERE ts >= $day_start AND ts < $day_end
GROUP BY ALL
ORDER BY sym, side, bucket;
