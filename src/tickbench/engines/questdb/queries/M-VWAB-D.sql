SELECT sym, sum(bid * bsize) / sum(bsize) AS vwab
FROM quotes
WHERE ts >= $d_start AND ts < $d_end AND sym IN ($b_syms)
ORDER BY sym;
