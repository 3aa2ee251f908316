-- open/close: first_value/last_value ordered by (ts, exchange, trade_id), SPEC §2.3's order.
SELECT sym, count(*) AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
       first_value(price ORDER BY ts, exchange, trade_id) AS open, max(price) AS high, min(price) AS low,
       last_value(price ORDER BY ts, exchange, trade_id) AS close, stddev_samp(price) AS sd
FROM trades
WHERE ts >= $d_start AND ts < $d_end
GROUP BY sym
ORDER BY sym;
