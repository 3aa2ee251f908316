-- LATEST ON: each (sym, exchange)'s last row by the designated timestamp, read backwards from the
-- newest partition; among rows of one ts the last stored, the greatest seq (the load's order).
SELECT sym, exchange, ts, bid, bsize, ask, asize
FROM quotes
WHERE ts >= $m_start AND ts < $m_end
LATEST ON ts PARTITION BY sym, exchange
ORDER BY sym, exchange;
