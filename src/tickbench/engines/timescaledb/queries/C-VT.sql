-- close = the price of each 5-minute bucket's last trade; trades may share a ts, and then the
-- highest trade_id is the last. last(price, ts) cannot break that tie, and last() over a
-- (ts, trade_id) row fails once TimescaleDB aggregates chunk by chunk (a partial state of an
-- anonymous record type cannot be serialised), so the close is DISTINCT ON the bucket.
WITH closes AS (
    SELECT DISTINCT ON (bucket) time_bucket('5 minutes', ts) AS bucket, price AS close
    FROM trades
    WHERE sym = %(sym)s AND ts >= %(day_start)s AND ts < %(day_end)s
    ORDER BY bucket, ts DESC, trade_id DESC
),
returns AS (
    SELECT bucket, ln(close) - ln(lag(close) OVER w) AS ret, row_number() OVER w AS n
    FROM closes
    WINDOW w AS (ORDER BY bucket)
)
SELECT time_bucket('1 hour', bucket) AS hour, stddev_samp(ret) AS vol
FROM returns
WHERE n > 1
GROUP BY hour
HAVING count(*) >= 2
ORDER BY hour;
