WITH closes AS (
    SELECT date_bin(INTERVAL '5 minutes', ts) AS bucket,
           last_value((a1price + b1price) / 2 ORDER BY ts) AS close
    FROM book
    WHERE sym = $sym AND ts >= $day_start AND ts < $day_end
    GROUP BY bucket
)
SELECT bucket, ln(close) - ln(lag(close) OVER (ORDER BY bucket)) AS ret
FROM closes
QUALIFY row_number() OVER (ORDER BY bucket) > 1
ORDER BY bucket;
