-- No ASOF JOIN in TimescaleDB: each trade's quote is the first row at or before its ts of its own
-- venue's batches (segmentby sym, exchange; newest first: the greatest (ts, seq), LIMIT 1) in D's
-- chunk; a trade with no quote before it drops out (CROSS JOIN LATERAL).
SELECT t.sym, count(*) AS n, avg(2 * abs(t.price - q.mid) / q.mid) AS eff_spread
FROM trades t
CROSS JOIN LATERAL (
    SELECT (q.bid + q.ask) / 2 AS mid FROM quotes q
    WHERE q.sym = t.sym AND q.exchange = t.exchange
      AND q.ts >= %(d_start)s AND q.ts < %(d_end)s AND q.ts <= t.ts
    ORDER BY q.ts DESC, q.seq DESC
    LIMIT 1
) q
WHERE t.sym = ANY(%(b50_syms)s::text[]) AND t.ts >= %(d_start)s AND t.ts < %(d_end)s
GROUP BY t.sym
ORDER BY t.sym;
