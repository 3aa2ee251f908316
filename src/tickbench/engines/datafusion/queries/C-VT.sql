WITH closes AS (
    SELECT date_bin(INTERVAL '5 minutes', ts) AS bucket,
           last_value(price ORDER BY ts, trade_id) AS close  -- ties on ts: the highest trade_id
    FROM trades
    WHERE sym = $sym AND ts >= $day_start AND ts < $day_end
    GROUP BY bucket
),
returns AS (
    SELECT bucket, ln(close) - ln(lag(close) OVER (ORDER BY bucket)) AS ret
    FROM closes
    QUALIFY row_number() OVER (ORDER BY bucket) > 1
)
SELECT date_bin(INTERVAL '1 hour', bucket) AS hour, stddev_samp(ret) AS vol
FROM returns
GROUP BY hour
HAVING count(ret) >= 2
ORDER BY hour;
