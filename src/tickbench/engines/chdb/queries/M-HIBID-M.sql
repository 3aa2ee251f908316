SELECT sym, max(bid) AS max_bid
FROM quotes
WHERE sym IN {b_syms:Array(String)}
  AND ts >= {m_start:DateTime64(6, 'UTC')} AND ts < {m_end:DateTime64(6, 'UTC')}
GROUP BY sym
ORDER BY sym
