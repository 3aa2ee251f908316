-- close = last(mid, ts): the mid of each 5-minute bucket's last snapshot; ret = ln(close) -
-- ln(the previous bucket's close) by lag(); the first bucket has no previous close and is dropped.
WITH closes AS (
    SELECT time_bucket('5 minutes', ts) AS bucket, last((a1price + b1price) / 2, ts) AS close
    FROM book
    WHERE sym = %(sym)s AND ts >= %(day_start)s AND ts < %(day_end)s
    GROUP BY bucket
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
