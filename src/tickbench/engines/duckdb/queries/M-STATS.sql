-- open/close: arg_min/arg_max by the (ts, exchange, trade_id) order, a struct key.
SELECT sym, count(*) AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
       arg_min(price, (ts, exchange, trade_id)) AS open, max(price) AS high, min(price) AS low,
       arg_max(price, (ts, exchange, trade_id)) AS close, stddev_samp(price) AS sd
FROM trades
WHERE ts >= $d_start AND ts < $d_end
GROUP BY sym
ORDER BY sym;
