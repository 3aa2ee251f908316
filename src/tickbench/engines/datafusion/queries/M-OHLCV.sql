-- date_bin: 5-minute buckets aligned to the epoch; open/close ordered by (ts, exchange, trade_id).
SELECT sym, date_bin(INTERVAL '5 minutes', ts) AS bucket,
       first_value(price ORDER BY ts, exchange, trade_id) AS open, max(price) AS high, min(price) AS low,
       last_value(price ORDER BY ts, exchange, trade_id) AS close, sum(amount) AS volume
FROM trades
WHERE array_has($b50_syms, sym) AND ts >= $d_start AND ts < $d_end
GROUP BY 1, 2
ORDER BY 1, 2;
