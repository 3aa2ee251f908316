-- first()/last() follow the storage order, which is (ts, exchange, trade_id).
SELECT sym, count() AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
       first(price) AS open, max(price) AS high, min(price) AS low, last(price) AS close,
       stddev_samp(price) AS sd
FROM trades
WHERE ts >= $d_start AND ts < $d_end
ORDER BY sym;
