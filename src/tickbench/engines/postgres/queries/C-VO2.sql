WITH closes AS (
    SELECT DISTINCT ON (bucket) date_bin('1 hour', ts, TIMESTAMPTZ 'epoch') AS bucket,
           (a1price + b1price) / 2 AS close
    FROM book
    WHERE sym = %(sym)s AND ts >= %(week_start)s AND ts < %(week_end)s
    ORDER BY bucket, ts DESC
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
