SELECT sym, side, ts AS day, sum(amount) AS volume
FROM trades
WHERE ts >= $month_start AND ts < $month_end
SAMPLE BY 1d FILL(NONE) ALIGN TO CALENDAR
ORDER BY sym, side, day;
