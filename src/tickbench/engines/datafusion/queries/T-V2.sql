SELECT sym, side, date_bin(INTERVAL '1 day', ts) AS day, sum(amount) AS volume
FROM trades
WHERE ts >= $month_start AND ts < $month_end
GROUP BY 1, 2, 3  -- by position: `day` is also the store's partition column
ORDER BY sym, side, day;
