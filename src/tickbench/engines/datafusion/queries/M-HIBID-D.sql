-- array_has over the bound basket: DataFusion folds it into sym = … OR …, which prunes files,
-- row groups and pages by their min/max statistics.
SELECT sym, max(bid) AS max_bid
FROM quotes
WHERE array_has($b_syms, sym) AND ts >= $d_start AND ts < $d_end
GROUP BY sym
ORDER BY sym;
