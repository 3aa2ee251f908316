SELECT sym, sum(bid * bsize) / sum(bsize) AS vwab
FROM quotes
WHERE sym = ANY(%(b_syms)s::text[]) AND ts >= %(d_start)s AND ts < %(d_end)s
GROUP BY sym
ORDER BY sym;
