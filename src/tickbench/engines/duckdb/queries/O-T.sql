SELECT p.t, b.ts, b.b1price, b.b1size, b.a1price, b.a1size
FROM (SELECT unnest($ot_times) AS t) p
ASOF JOIN (
    SELECT ts, b1price, b1size, a1price, a1size
    FROM book
    WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
) b ON p.t >= b.ts
ORDER BY p.t;
