SELECT sym, max(bid) AS max_bid
FROM quotes
WHERE sym = ANY(%(b_syms)s::text[]) AND ts >= %(w_start)s AND ts < %(w_end)s
GROUP BY sym
ORDER BY sym;
