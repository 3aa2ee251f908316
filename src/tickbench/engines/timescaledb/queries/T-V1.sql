-- Chunk exclusion keeps D's chunk only; the aggregation runs over its decompressed batches
-- (grouped by the segmentby column sym and the bucket).
SELECT sym, side, time_bucket('1 minute', ts) AS bucket, sum(amount) AS volume
FROM trades
WHERE ts >= %(day_start)s AND ts < %(day_end)s
GROUP BY sym, side, bucket
ORDER BY sym, side, bucket;
