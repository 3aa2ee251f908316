-- close = the mid of each bucket's last snapshot (DISTINCT ON), ret = ln(close) - ln(the
-- previous bucket's close) by lag(); the first bucket has no previous close and is dropped.
WITH closes AS (
    SELECT DISTINCT ON (bucket) date_bin('5 minutes', ts, TIMESTAMPTZ 'epoch') AS bucket,
           (a1price + b1price) / 2 AS close
    FROM book
    WHERE sym = %(sym)s AND ts >= %(day_start)s AND ts < %(day_end)s
    ORDER BY bucket, ts DESC
),
returns AS (
    SELECT bucket, ln(close) - ln(lag(close) OVER w) AS ret, row_number() OVER w AS n
    FROM closes
    WINDOW w AS (ORDER BY bucket)
)
SELECT bucket, ret
FROM returns
WHERE n > 1
ORDER BY bucket;
