-- close = the mid of each 5-minute bucket's last snapshot: S's rows in ts order (the (sym, ts)
-- index's order, the day's partition: no sort), and a row whose successor lies in another bucket
-- (or that has none) is its bucket's last; ret = ln(close) - ln(the previous bucket's close) by
-- lag(); the first bucket has no previous close and is dropped.
WITH marked AS (
    SELECT date_bin('5 minutes', ts, TIMESTAMPTZ 'epoch') AS bucket,
           (a1price + b1price) / 2 AS close,
           lead(date_bin('5 minutes', ts, TIMESTAMPTZ 'epoch')) OVER (ORDER BY ts) AS next_bucket
    FROM book
    WHERE sym = %(sym)s AND ts >= %(day_start)s AND ts < %(day_end)s
),
closes AS (
    SELECT bucket, close FROM marked WHERE next_bucket IS DISTINCT FROM bucket
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
