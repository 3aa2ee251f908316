SELECT sym, max(bid) AS max_bid
FROM quotes
WHERE sym IN (SELECT unnest($b_syms)) AND ts >= $m_start AND ts < $m_end
GROUP BY sym
ORDER BY sym;
