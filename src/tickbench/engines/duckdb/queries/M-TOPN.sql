SELECT row_number() OVER (ORDER BY notional DESC, sym) AS rank, sym, notional
FROM (
    SELECT sym, sum(price * amount) AS notional
    FROM trades
    WHERE ts >= $d_start AND ts < $d_end
    GROUP BY sym
    ORDER BY notional DESC, sym
    LIMIT 20
)
ORDER BY rank;
