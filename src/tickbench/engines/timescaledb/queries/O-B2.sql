SELECT sym, max(b1price) AS max_bid
FROM book
WHERE ts >= %(month_start)s AND ts < %(month_end)s
GROUP BY sym
ORDER BY sym;
