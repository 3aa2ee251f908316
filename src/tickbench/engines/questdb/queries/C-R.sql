-- last(): rows are stored in ts order and a snapshot's ts is unique per (exchange, sym).
WITH closes AS (
    SELECT ts AS bucket, last((a1price + b1price) / 2) AS close
    FROM book
    WHERE sym = $sym AND ts >= $day_start AND ts < $day_end
    SAMPLE BY 5m FILL(NONE) ALIGN TO CALENDAR
),
returns AS (
    SELECT bucket,
           ln(close) - ln(lag(close) OVER (ORDER BY bucket)) AS ret,
           row_number() OVER (ORDER BY bucket) AS n
    FROM closes
)
SELECT bucket, ret
FROM returns
WHERE n > 1
ORDER BY bucket;
