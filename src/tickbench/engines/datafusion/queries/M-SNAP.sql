-- A snapshot at each t of T for each instrument of B, without ASOF JOIN (DataFusion has none):
-- the probes (t, sym) are merged with D's trades, and with D's quotes once per venue, and a
-- window in time order carries the latest value to each probe (last_value IGNORE NULLS). A row
-- at t itself precedes the probe (ts <= t); ties keep SPEC §2.3's order: trades by (exchange,
-- trade_id), a venue's quotes by seq.
WITH grid AS (
    SELECT arrow_cast(t, 'Timestamp(Nanosecond, Some("UTC"))') AS t, sym
    FROM (SELECT unnest(CAST($t_times AS TIMESTAMP[])) AS t)
    CROSS JOIN (SELECT unnest(CAST($b_syms AS VARCHAR[])) AS sym)
),
tr AS (
    SELECT sym, ts, exchange, trade_id, price, amount FROM trades
    WHERE array_has($b_syms, sym) AND ts >= $d_start AND ts < $d_end
),
qu AS (
    SELECT sym, exchange, ts, seq, bid, ask FROM quotes
    WHERE array_has($b_syms, sym) AND ts >= $d_start AND ts < $d_end
),
last_trade AS (
    SELECT t, sym, price AS last_price, amount AS last_amount FROM (
        SELECT ts AS t, sym, probe,
               last_value(price) IGNORE NULLS OVER w AS price,
               last_value(amount) IGNORE NULLS OVER w AS amount
        FROM (
            SELECT sym, ts, 0 AS probe, exchange, trade_id, price, amount FROM tr
            UNION ALL
            SELECT sym, t AS ts, 1 AS probe, CAST(NULL AS VARCHAR) AS exchange, CAST(NULL AS BIGINT) AS trade_id,
                   CAST(NULL AS DOUBLE) AS price, CAST(NULL AS DOUBLE) AS amount
            FROM grid
        )
        WINDOW w AS (PARTITION BY sym ORDER BY ts, probe, exchange, trade_id
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
    ) WHERE probe = 1
),
book AS (
    SELECT t, sym, max(bid) AS nbb, min(ask) AS nbo FROM (
        SELECT ts AS t, sym, probe,
               last_value(bid) IGNORE NULLS OVER w AS bid,
               last_value(ask) IGNORE NULLS OVER w AS ask
        FROM (
            SELECT sym, exchange, ts, 0 AS probe, seq, bid, ask FROM qu
            UNION ALL
            SELECT g.sym, v.exchange, g.t AS ts, 1 AS probe, CAST(NULL AS BIGINT) AS seq,
                   CAST(NULL AS DOUBLE) AS bid, CAST(NULL AS DOUBLE) AS ask
            FROM grid g JOIN (SELECT DISTINCT sym, exchange FROM qu) v ON g.sym = v.sym
        )
        WINDOW w AS (PARTITION BY sym, exchange ORDER BY ts, probe, seq
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
    ) WHERE probe = 1
    GROUP BY t, sym
)
SELECT g.t, g.sym, l.last_price, l.last_amount, b.nbb, b.nbo
FROM grid g
LEFT JOIN last_trade l ON l.t = g.t AND l.sym = g.sym
LEFT JOIN book b ON b.t = g.t AND b.sym = g.sym
ORDER BY g.t, g.sym;
