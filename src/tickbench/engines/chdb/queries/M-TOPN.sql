SELECT toInt64(row_number() OVER (ORDER BY notional DESC, sym)) AS rank, sym, notional
FROM (
    SELECT sym, sum(price * amount) AS notional
    FROM trades
    WHERE ts >= {d_start:DateTime64(6, 'UTC')} AND ts < {d_end:DateTime64(6, 'UTC')}
    GROUP BY sym
    ORDER BY notional DESC, sym
    LIMIT 20
)
ORDER BY rank
