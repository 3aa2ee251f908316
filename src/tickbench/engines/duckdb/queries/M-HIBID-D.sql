SELECT sym, max(bid) AS max_bid
FROM quotes
WHERE sym IN (SELECT unnest($b_syms)) AND ts >= $d_start AND ts < $d_end
GROUP BY sym
ORDER BY sym;
