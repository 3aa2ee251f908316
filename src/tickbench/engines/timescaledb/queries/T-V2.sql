SELECT sym, side, time_bucket('1 day', ts) AS day, sum(amount) AS volume
FROM trades
WHERE ts >= %(month_start)s AND ts < %(month_end)s
GROUP BY sym, side, day
ORDER BY sym, side, day;
