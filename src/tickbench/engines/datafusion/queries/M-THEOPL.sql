-- Mark-outs without ASOF JOIN (DataFusion has none): each trade of P at ts + h is a probe row
-- merged with its instrument's quotes of D; a window per (sym, exchange) in (ts, seq) order
-- carries the venue's latest mid to the probe (last_value IGNORE NULLS; a quote at ts + h itself
-- precedes it). A probe with no quote before it has no row.
WITH p AS (
    SELECT unnest(CAST($p_exchanges AS VARCHAR[])) AS exchange, unnest(CAST($p_syms AS VARCHAR[])) AS sym,
           unnest(CAST($p_trade_ids AS BIGINT[])) AS trade_id
),
tr AS (
    SELECT t.exchange, t.sym, t.trade_id, t.ts, t.side, t.price, t.amount
    FROM trades t JOIN p ON t.exchange = p.exchange AND t.sym = p.sym AND t.trade_id = p.trade_id
    WHERE array_has($p_syms, t.sym) AND t.ts >= $d_start AND t.ts < $d_end
),
probes AS (
    SELECT tr.*, h.h, tr.ts + h.dt AS at
    FROM tr CROSS JOIN (SELECT column1 AS h, column2 AS dt FROM (VALUES
        (1, INTERVAL '1 second'), (10, INTERVAL '10 seconds'), (60, INTERVAL '60 seconds'),
        (300, INTERVAL '300 seconds'))) h
),
marked AS (
    SELECT exchange, sym, trade_id, h, side, price, amount, probe,
           last_value(mid) IGNORE NULLS OVER (PARTITION BY sym, exchange ORDER BY ts, probe, seq
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS mark
    FROM (
        SELECT exchange, sym, ts, 0 AS probe, seq, (bid + ask) / 2 AS mid, CAST(NULL AS BIGINT) AS trade_id,
               CAST(NULL AS BIGINT) AS h, CAST(NULL AS VARCHAR) AS side, CAST(NULL AS DOUBLE) AS price,
               CAST(NULL AS DOUBLE) AS amount
        FROM quotes
        WHERE array_has($p_syms, sym) AND ts >= $d_start AND ts < $d_end
        UNION ALL
        SELECT exchange, sym, at AS ts, 1 AS probe, CAST(NULL AS BIGINT) AS seq, CAST(NULL AS DOUBLE) AS mid,
               trade_id, h, side, price, amount
        FROM probes
    )
)
SELECT exchange, sym, trade_id, h,
       (CASE WHEN side = 'buy' THEN 1.0 ELSE -1.0 END) * amount * (mark - price) AS pnl
FROM marked
WHERE probe = 1 AND mark IS NOT NULL
ORDER BY exchange, sym, trade_id, h;
