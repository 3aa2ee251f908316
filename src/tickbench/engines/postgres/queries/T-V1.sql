SELECT sym, side, date_bin('1 minute', ts, TIMESTAMPTZ 'epoch') AS bucket, sum(amount) AS volume
FROM trades
WHERE ts >= %(day_start)s AND ts < %(day_end)s
GROUP BY sym, side, bucket
ORDER BY sym, side, bucket;
