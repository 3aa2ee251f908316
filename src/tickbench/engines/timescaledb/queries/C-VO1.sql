-- 5-minute mid-quote closes by last(mid, ts), returns by lag(), their sample standard
-- deviation per hour of the bucket (an hour with fewer than two returns has none).
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
SELECT time_bucket('1 hour', bucket) AS hour, stddev_samp(ret) AS vol
FROM returns
WHERE n > 1
GROUP BY hour
HAVING count(*) >= 2
ORDER BY hour;
