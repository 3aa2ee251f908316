WITH closes AS (
    SELECT time_bucket('1 hour', ts) AS bucket, last((a1price + b1price) / 2, ts) AS close
    FROM book
    WHERE sym = %(sym)s AND ts >= %(week_start)s AND ts < %(week_end)s
    GROUP BY bucket
),
returns AS (
    SELECT bucket, ln(close) - ln(lag(close) OVER w) AS ret, row_number() OVER w AS n
    FROM closes
    WINDOW w AS (ORDER BY bucket)
)
SELECT time_bucket('4 hours', bucket) AS bucket4h, stddev_samp(ret) AS vol
FROM returns
WHERE n > 1
GROUP BY bucket4h
HAVING count(*) >= 2
ORDER BY bucket4h;
