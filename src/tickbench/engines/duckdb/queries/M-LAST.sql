-- The latest quote per (sym, exchange) over M, by (ts, seq): seq is unique per (exchange, sym)
-- and increases with ts (SPEC §1.3), so the greatest seq is that quote, and arg_max keyed on the
-- one integer is a cheap aggregate (a (ts, seq) struct key made it about seven times slower).
SELECT sym, exchange, max(ts) AS ts,
       arg_max(bid, seq) AS bid, arg_max(bsize, seq) AS bsize,
       arg_max(ask, seq) AS ask, arg_max(asize, seq) AS asize
FROM quotes
WHERE ts >= $m_start AND ts < $m_end
GROUP BY sym, exchange
ORDER BY sym, exchange;
