SELECT sym, max(b1price) AS max_bid
FROM book
WHERE ts >= $month_start AND ts < $month_end
GROUP BY sym
ORDER BY sym;
