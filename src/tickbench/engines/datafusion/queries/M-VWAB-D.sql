SELECT sym, sum(bid * bsize) / sum(bsize) AS vwab
FROM quotes
WHERE array_has($b_syms, sym) AND ts >= $d_start AND ts < $d_end
GROUP BY sym
ORDER BY sym;
