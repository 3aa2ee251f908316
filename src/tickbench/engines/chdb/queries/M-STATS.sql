-- open/close: argMin/argMax over the total trade order (ts, exchange, trade_id); sd null for one
-- trade (stddevSamp gives nan); stddevSampStable (Welford), as prices far exceed their spread.
SELECT sym, count() AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
       argMin(price, (ts, exchange, trade_id)) AS open, max(price) AS high, min(price) AS low,
       argMax(price, (ts, exchange, trade_id)) AS close,
       if(count() > 1, stddevSampStable(price), NULL) AS sd
FROM trades
WHERE ts >= {d_start:DateTime64(6, 'UTC')} AND ts < {d_end:DateTime64(6, 'UTC')}
GROUP BY sym
ORDER BY sym
