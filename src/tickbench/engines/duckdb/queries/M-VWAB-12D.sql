SELECT sym, CAST(ts AS DATE) AS day, sum(bid * bsize) / sum(bsize) AS vwab
FROM quotes
WHERE sym IN (SELECT unnest($vwab_syms)) AND ts >= $vwab_start AND ts < $vwab_end
GROUP BY sym, day
ORDER BY sym, day;
