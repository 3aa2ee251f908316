-- Vectorised aggregation over the compressed batches, grouped by the segmentby column sym.
SELECT sym, max(b1price) AS max_bid
FROM book
WHERE ts >= %(week_start)s AND ts < %(week_end)s
GROUP BY sym
ORDER BY sym;
