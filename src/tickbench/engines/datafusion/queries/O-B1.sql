SELECT sym, max(b1price) AS max_bid
FROM book
WHERE ts >= $week_start AND ts < $week_end
GROUP BY sym
ORDER BY sym;
