SELECT sym, side, toDate(ts) AS day, sum(amount) AS volume
FROM trades
WHERE ts >= {month_start:DateTime64(6, 'UTC')} AND ts < {month_end:DateTime64(6, 'UTC')}
GROUP BY sym, side, day
ORDER BY sym, side, day
