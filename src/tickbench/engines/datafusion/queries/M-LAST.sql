-- The latest quote per (sym, exchange) over M: last_value ordered by (ts, seq), SPEC §2.3's order.
SELECT sym, exchange, max(ts) AS ts,
       last_value(bid ORDER BY ts, seq) AS bid, last_value(bsize ORDER BY ts, seq) AS bsize,
       last_value(ask ORDER BY ts, seq) AS ask, last_value(asize ORDER BY ts, seq) AS asize
FROM quotes
WHERE ts >= $m_start AND ts < $m_end
GROUP BY sym, exchange
ORDER BY sym, exchange;
