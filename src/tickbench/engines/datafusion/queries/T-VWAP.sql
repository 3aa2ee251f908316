SELECT date_bin(INTERVAL '1 minute', ts) AS bucket, sum(price * amount) / sum(amount) AS vwap
FROM trades
WHERE sym = $sym AND ts >= $day_start AND ts < $day_end
GROUP BY bucket
ORDER BY bucket;
