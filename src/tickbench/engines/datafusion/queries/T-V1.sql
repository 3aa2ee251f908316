SELECT sym, side, date_bin(INTERVAL '1 minute', ts) AS bucket, sum(amount) AS volume
FROM trades
WHERE ts >= $day_start AND ts < $day_end
GROUP BY sym, side, bucket
ORDER BY sym, side, bucket;
