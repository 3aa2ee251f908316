-- ASOF JOIN of D's trades to their own venue's quotes: the nearest quote ts <= the trade's ts. The
-- quotes are first cut to one per (exchange, sym, ts), the greatest seq's (argMax), so the lookup
-- finds the latest by (ts, seq) where several quotes share a ts.
SELECT t.sym AS sym, count() AS n,
       avg(2 * abs(t.price - (q.bid + q.ask) / 2) / ((q.bid + q.ask) / 2)) AS eff_spread
FROM (
    SELECT sym, exchange, ts, price
    FROM trades
    WHERE sym IN {b50_syms:Array(String)}
      AND ts >= {d_start:DateTime64(6, 'UTC')} AND ts < {d_end:DateTime64(6, 'UTC')}
) AS t
ASOF INNER JOIN (
    SELECT sym, exchange, ts, argMax(bid, seq) AS bid, argMax(ask, seq) AS ask
    FROM quotes
    WHERE sym IN {b50_syms:Array(String)}
      AND ts >= {d_start:DateTime64(6, 'UTC')} AND ts < {d_end:DateTime64(6, 'UTC')}
    GROUP BY sym, exchange, ts
) AS q ON t.sym = q.sym AND t.exchange = q.exchange AND t.ts >= q.ts
GROUP BY sym
ORDER BY sym
