SELECT sym, max(bid) AS max_bid
FROM quotes
WHERE ts >= $w_start AND ts < $w_end AND sym IN ($b_syms)
ORDER BY sym;
