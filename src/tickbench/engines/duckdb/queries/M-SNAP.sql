-- A snapshot at each t of T for each instrument of B: ASOF JOINs over D's rows only. Several rows
-- can share a ts: trades are first made one per (sym, ts), the last in (exchange, trade_id) order
-- (arg_max), and each venue's quote lookup compares (ts, seq) pairs (the greatest seq wins).
WITH grid AS (
    SELECT CAST(t AS TIMESTAMP_NS) AS t, sym
    FROM (SELECT unnest($t_times) AS t) CROSS JOIN (SELECT unnest($b_syms) AS sym)
),
tr AS (
    SELECT sym, ts, arg_max(price, (exchange, trade_id)) AS price, arg_max(amount, (exchange, trade_id)) AS amount
    FROM trades
    WHERE sym IN (SELECT unnest($b_syms)) AND ts >= $d_start AND ts < $d_end
    GROUP BY sym, ts
),
qu AS (
    SELECT sym, exchange, ts, seq, bid, ask FROM quotes
    WHERE sym IN (SELECT unnest($b_syms)) AND ts >= $d_start AND ts < $d_end
),
last AS (
    SELECT g.t, g.sym, tr.price AS last_price, tr.amount AS last_amount
    FROM grid g ASOF JOIN tr ON g.sym = tr.sym AND g.t >= tr.ts
),
book AS (
    SELECT pv.t, pv.sym, max(qu.bid) AS nbb, min(qu.ask) AS nbo
    FROM (SELECT g.t, g.sym, v.exchange FROM grid g JOIN (SELECT DISTINCT sym, exchange FROM qu) v USING (sym)) pv
    ASOF JOIN qu ON pv.sym = qu.sym AND pv.exchange = qu.exchange AND (pv.t, 9223372036854775807) >= (qu.ts, qu.seq)
    GROUP BY pv.t, pv.sym
)
SELECT g.t, g.sym, last.last_price, last.last_amount, book.nbb, book.nbo
FROM grid g
LEFT JOIN last ON last.t = g.t AND last.sym = g.sym
LEFT JOIN book ON book.t = g.t AND book.sym = g.sym
ORDER BY g.t, g.sym;
