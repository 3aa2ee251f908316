SELECT sym, side, time_bucket(INTERVAL '1 day', ts) AS day, sum(amount) AS volume
FROM trades
WHERE ts >= $month_start AND ts < $month_end
GROUP BY ALL
ORDER BY sym, side, day;
