-- close = the price of each 5-minute bucket's last trade; trades may share a ts, and then the
-- highest trade_id is the last: last() orders by the (ts, trade_id) pair.
WITH closes AS (
    SELECT time_bucket('5 minutes', ts) AS bucket, last(price, (ts, trade_id)) AS close
    FROM trades
    WHERE sym = %(sym)s AND ts >= %(day_start)s AND ts < %(day_end)s
    GROUP BY bucket
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
