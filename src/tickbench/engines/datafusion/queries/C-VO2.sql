WITH closes AS (
    SELECT date_bin(INTERVAL '1 hour', ts) AS bucket,
           last_value((a1price + b1price) / 2 ORDER BY ts) AS close
    FROM book
    WHERE sym = $sym AND ts >= $week_start AND ts < $week_end
    GROUP BY bucket
),
returns AS (
    SELECT bucket, ln(close) - ln(lag(close) OVER (ORDER BY bucket)) AS ret
    FROM closes
    QUALIFY row_number() OVER (ORDER BY bucket) > 1
)
SELECT date_bin(INTERVAL '4 hours', bucket) AS bucket4h, stddev_samp(ret) AS vol
FROM returns
GROUP BY bucket4h
HAVING count(ret) >= 2
ORDER BY bucket4h;
