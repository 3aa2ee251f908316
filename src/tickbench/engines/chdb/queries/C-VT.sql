WITH closes AS (
    SELECT toStartOfInterval(ts, INTERVAL 5 MINUTE) AS bucket,
           argMax(price, (ts, trade_id)) AS close  -- ties on ts: the highest trade_id
    FROM trades
    WHERE sym = {sym:String} AND ts >= {day_start:DateTime64(6, 'UTC')} AND ts < {day_end:DateTime64(6, 'UTC')}
    GROUP BY bucket
),
returns AS (
    SELECT bucket, ln(close) - ln(lagInFrame(close) OVER (ORDER BY bucket ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)) AS ret
    FROM closes
    QUALIFY row_number() OVER (ORDER BY bucket) > 1
)
SELECT toStartOfInterval(bucket, INTERVAL 1 HOUR) AS hour, stddevSamp(ret) AS vol
FROM returns
GROUP BY hour
HAVING count() >= 2
ORDER BY hour
