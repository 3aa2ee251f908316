SELECT sym, max(bid) AS max_bid
FROM quotes
WHERE sym IN (SELECT unnest($b_syms)) AND ts >= $w_start AND ts < $w_end
GROUP BY sym
ORDER BY sym;
