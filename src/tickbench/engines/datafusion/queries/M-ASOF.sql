-- Each trade of B50 on D with its own venue's latest quote, without ASOF JOIN (DataFusion has
-- none): trades merged with the quotes, a window per (sym, exchange) in (ts, seq) order carries
-- the latest mid to each trade (last_value IGNORE NULLS; a quote at the trade's ts precedes it).
WITH merged AS (
    SELECT sym, exchange, ts, 0 AS probe, seq, (bid + ask) / 2 AS mid, CAST(NULL AS DOUBLE) AS price
    FROM quotes
    WHERE array_has($b50_syms, sym) AND ts >= $d_start AND ts < $d_end
    UNION ALL
    SELECT sym, exchange, ts, 1 AS probe, CAST(NULL AS BIGINT) AS seq, CAST(NULL AS DOUBLE) AS mid, price
    FROM trades
    WHERE array_has($b50_syms, sym) AND ts >= $d_start AND ts < $d_end
),
marked AS (
    SELECT sym, probe, price,
           last_value(mid) IGNORE NULLS OVER (PARTITION BY sym, exchange ORDER BY ts, probe, seq
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS mid
    FROM merged
)
SELECT sym, count(*) AS n, avg(2 * abs(price - mid) / mid) AS eff_spread
FROM marked
WHERE probe = 1 AND mid IS NOT NULL
GROUP BY sym
ORDER BY sym;
