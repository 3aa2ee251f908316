SELECT row_number() OVER (ORDER BY notional DESC, sym) AS rank, sym, notional
FROM (
    SELECT sym, sum(price * amount) AS notional
    FROM trades
    WHERE ts >= %(d_start)s AND ts < %(d_end)s
    GROUP BY sym
) s
ORDER BY notional DESC, sym
LIMIT 20;
