SELECT date_bin('1 minute', ts, TIMESTAMPTZ 'epoch') AS bucket, sum(price * amount) / sum(amount) AS vwap
FROM trades
WHERE sym = %(sym)s AND ts >= %(day_start)s AND ts < %(day_end)s
GROUP BY bucket
ORDER BY bucket;
