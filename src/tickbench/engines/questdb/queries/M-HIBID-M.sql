SELECT sym, max(bid) AS max_bid
FROM quotes
WHERE ts >= $m_start AND ts < $m_end AND sym IN ($b_syms)
ORDER BY sym;
