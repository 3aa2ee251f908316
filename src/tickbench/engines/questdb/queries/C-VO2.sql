-- last(): rows are stored in ts order and a snapshot's ts is unique per (exchange, sym).
WITH closes AS (
    SELECT ts AS bucket, last((a1price + b1price) / 2) AS close
    FROM book
    WHERE sym = $sym AND ts >= $week_start AND ts < $week_end
    SAMPLE BY 1h FILL(NONE) ALIGN TO CALENDAR
),
returns AS (
    SELECT bucket,
           ln(close) - ln(lag(close) OVER (ORDER BY bucket)) AS ret,
           row_number() OVER (ORDER BY bucket) AS n
    FROM closes
),
buckets AS (
    SELECT timestamp_floor('4h', bucket) AS bucket4h, stddev_samp(ret) AS vol, count() AS k
    FROM returns
    WHERE n > 1
    GROUP BY bucket4h
)
SELECT bucket4h, vol
FROM buckets
WHERE k >= 2
ORDER BY bucket4h;
