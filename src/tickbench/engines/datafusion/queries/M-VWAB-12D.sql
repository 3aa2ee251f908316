-- Grouped by position: day is also the store's partition column, which GROUP BY day would name.
SELECT sym, CAST(ts AS DATE) AS day, sum(bid * bsize) / sum(bsize) AS vwab
FROM quotes
WHERE array_has($vwab_syms, sym) AND ts >= $vwab_start AND ts < $vwab_end
GROUP BY 1, 2
ORDER BY 1, 2;
