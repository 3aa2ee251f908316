SELECT sym, max(b1price) AS max_bid
FROM book
WHERE ts >= {month_start:DateTime64(6, 'UTC')} AND ts < {month_end:DateTime64(6, 'UTC')}
GROUP BY sym
ORDER BY sym
