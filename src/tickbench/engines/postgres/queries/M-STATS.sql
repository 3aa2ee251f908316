-- open and close: the first and last price in the trade order (ts, exchange, trade_id), as the
-- first element of an ordered array_agg (PostgreSQL has no first/last aggregate).
SELECT sym, count(*) AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
       (array_agg(price ORDER BY ts, exchange, trade_id))[1] AS open,
       max(price) AS high, min(price) AS low,
       (array_agg(price ORDER BY ts DESC, exchange DESC, trade_id DESC))[1] AS close,
       stddev_samp(price) AS sd
FROM trades
WHERE ts >= %(d_start)s AND ts < %(d_end)s
GROUP BY sym
ORDER BY sym;
