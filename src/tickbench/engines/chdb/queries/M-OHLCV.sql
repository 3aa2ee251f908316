SELECT sym, toStartOfInterval(ts, INTERVAL 5 MINUTE) AS bucket,
       argMin(price, (ts, exchange, trade_id)) AS open, max(price) AS high, min(price) AS low,
       argMax(price, (ts, exchange, trade_id)) AS close, sum(amount) AS volume
FROM trades
WHERE sym IN {b50_syms:Array(String)}
  AND ts >= {d_start:DateTime64(6, 'UTC')} AND ts < {d_end:DateTime64(6, 'UTC')}
GROUP BY sym, bucket
ORDER BY sym, bucket
