SELECT sym, max(b1price) AS max_bid
FROM book
WHERE ts >= {week_start:DateTime64(6, 'UTC')} AND ts < {week_end:DateTime64(6, 'UTC')}
GROUP BY sym
ORDER BY sym
