-- open/close: arg_min/arg_max by the (ts, exchange, trade_id) order, a struct key.
SELECT sym, time_bucket(INTERVAL 5 MINUTE, ts) AS bucket,
       arg_min(price, (ts, exchange, trade_id)) AS open, max(price) AS high, min(price) AS low,
       arg_max(price, (ts, exchange, trade_id)) AS close, sum(amount) AS volume
FROM trades
WHERE sym IN (SELECT unnest($b50_syms)) AND ts >= $d_start AND ts < $d_end
GROUP BY sym, bucket
ORDER BY sym, bucket;
