-- arg_max(price, trade_id): the bucket's last trade, ties on ts to the highest trade_id
-- (trade_id increases with ts per exchange and sym, and D is single-exchange).
WITH closes AS (
    SELECT ts AS bucket, arg_max(price, trade_id) AS close
    FROM trades
    WHERE sym = $sym AND ts >= $day_start AND ts < $day_end
    SAMPLE BY 5m FILL(NONE) ALIGN TO CALENDAR
),
returns AS (
    SELECT bucket,
           ln(close) - ln(lag(close) OVER (ORDER BY bucket)) AS ret,
           row_number() OVER (ORDER BY bucket) AS n
    FROM closes
),
hourly AS (
    SELECT timestamp_floor('1h', bucket) AS hour, stddev_samp(ret) AS vol, count() AS k
    FROM returns
    WHERE n > 1
    GROUP BY hour
)
SELECT hour, vol
FROM hourly
WHERE k >= 2
ORDER BY hour;
