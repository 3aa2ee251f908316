-- sym is a segmentby column: only S's compressed batches of D's chunk are read.
SELECT time_bucket('1 minute', ts) AS bucket, sum(price * amount) / sum(amount) AS vwap
FROM trades
WHERE sym = %(sym)s AND ts >= %(day_start)s AND ts < %(day_end)s
GROUP BY bucket
ORDER BY bucket;
