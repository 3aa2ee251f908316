WITH closes AS (
    SELECT toStartOfInterval(ts, INTERVAL 1 HOUR) AS bucket,
           argMax((a1price + b1price) / 2, ts) AS close
    FROM book
    WHERE sym = {sym:String} AND ts >= {week_start:DateTime64(6, 'UTC')} AND ts < {week_end:DateTime64(6, 'UTC')}
    GROUP BY bucket
),
returns AS (
    SELECT bucket, ln(close) - ln(lagInFrame(close) OVER (ORDER BY bucket ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)) AS ret
    FROM closes
    QUALIFY row_number() OVER (ORDER BY bucket) > 1
)
SELECT toStartOfInterval(bucket, INTERVAL 4 HOUR) AS bucket4h, stddevSamp(ret) AS vol
FROM returns
GROUP BY bucket4h
HAVING count() >= 2
ORDER BY bucket4h
