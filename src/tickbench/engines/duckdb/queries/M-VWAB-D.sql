SELECT sym, sum(bid * bsize) / sum(bsize) AS vwab
FROM quotes
WHERE sym IN (SELECT unnest($b_syms)) AND ts >= $d_start AND ts < $d_end
GROUP BY sym
ORDER BY sym;
