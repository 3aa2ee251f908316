-- SAMPLE BY 5m: first()/last() follow the storage order, which is (ts, exchange, trade_id).
SELECT sym, ts AS bucket, first(price) AS open, max(price) AS high, min(price) AS low,
       last(price) AS close, sum(amount) AS volume
FROM trades
WHERE ts >= $d_start AND ts < $d_end AND sym IN ($b50_syms)
SAMPLE BY 5m ALIGN TO CALENDAR
ORDER BY sym, bucket;
