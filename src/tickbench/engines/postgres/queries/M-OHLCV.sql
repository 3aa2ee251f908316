-- open and close as in M-STATS: ordered array_agg in the trade order (ts, exchange, trade_id).
SELECT sym, date_bin('5 minutes', ts, TIMESTAMPTZ 'epoch') AS bucket,
       (array_agg(price ORDER BY ts, exchange, trade_id))[1] AS open,
       max(price) AS high, min(price) AS low,
       (array_agg(price ORDER BY ts DESC, exchange DESC, trade_id DESC))[1] AS close,
       sum(amount) AS volume
FROM trades
WHERE sym = ANY(%(b50_syms)s::text[]) AND ts >= %(d_start)s AND ts < %(d_end)s
GROUP BY sym, bucket
ORDER BY sym, bucket;
