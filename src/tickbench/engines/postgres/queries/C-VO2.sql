-- 1-hour closes as in C-R (S's rows in the (sym, ts) index's order, the week's partitions in
-- time order: no sort; a row whose successor lies in another bucket is its bucket's last),
-- returns by lag(), their sample standard deviation per 4 hours.
WITH marked AS (
    SELECT date_bin('1 hour', ts, TIMESTAMPTZ 'epoch') AS bucket,
           (a1price + b1price) / 2 AS close,
           lead(date_bin('1 hour', ts, TIMESTAMPTZ 'epoch')) OVER (ORDER BY ts) AS next_bucket
    FROM book
    WHERE sym = %(sym)s AND ts >= %(week_start)s AND ts < %(week_end)s
),
closes AS (
    SELECT bucket, close FROM marked WHERE next_bucket IS DISTINCT FROM bucket
),
returns AS (
    SELECT bucket, ln(close) - ln(lag(close) OVER w) AS ret, row_number() OVER w AS n
    FROM closes
    WINDOW w AS (ORDER BY bucket)
)
SELECT date_bin('4 hours', bucket, TIMESTAMPTZ 'epoch') AS bucket4h, stddev_samp(ret) AS vol
FROM returns
WHERE n > 1
GROUP BY bucket4h
HAVING count(*) >= 2
ORDER BY bucket4h;
