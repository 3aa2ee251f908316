SELECT sym, max(bid) AS max_bid
FROM quotes
WHERE ts >= $d_start AND ts < $d_end AND sym IN ($b_syms)
ORDER BY sym;
