-- No ASOF JOIN in PostgreSQL: each (t, sym)'s last trade at or before t is a backward probe of
-- trades' (sym, ts, exchange, trade_id) btree (the trade order, LIMIT 1), and each venue's
-- latest quote at t a backward probe of quotes' (sym, exchange, ts, seq) btree, the venues of
-- the instrument on D coming from a skip scan of the same index (one descent per venue). Every
-- range names D's bounds as literals, so D's partition is the only one planned.
WITH RECURSIVE venues(sym, exchange) AS (
    SELECT b.sym,
           (SELECT q.exchange FROM quotes q
            WHERE q.sym = b.sym AND q.ts >= %(d_start)s AND q.ts < %(d_end)s
            ORDER BY q.exchange LIMIT 1)
    FROM unnest(%(b_syms)s::text[]) AS b(sym)
    UNION ALL
    SELECT v.sym,
           (SELECT q.exchange FROM quotes q
            WHERE q.sym = v.sym AND q.exchange > v.exchange AND q.ts >= %(d_start)s AND q.ts < %(d_end)s
            ORDER BY q.exchange LIMIT 1)
    FROM venues v
    WHERE v.exchange IS NOT NULL
),
book AS (
    SELECT p.t, v.sym, max(l.bid) AS nbb, min(l.ask) AS nbo
    FROM unnest(%(t_times)s::timestamptz[]) AS p(t)
    CROSS JOIN venues v
    CROSS JOIN LATERAL (
        SELECT q.bid, q.ask FROM quotes q
        WHERE q.sym = v.sym AND q.exchange = v.exchange
          AND q.ts >= %(d_start)s AND q.ts < %(d_end)s AND q.ts <= p.t
        ORDER BY q.ts DESC, q.seq DESC
        LIMIT 1
    ) l
    WHERE v.exchange IS NOT NULL
    GROUP BY p.t, v.sym
)
SELECT p.t, b.sym, tr.price AS last_price, tr.amount AS last_amount, bk.nbb, bk.nbo
FROM unnest(%(t_times)s::timestamptz[]) AS p(t)
CROSS JOIN unnest(%(b_syms)s::text[]) AS b(sym)
LEFT JOIN LATERAL (
    SELECT x.price, x.amount FROM trades x
    WHERE x.sym = b.sym AND x.ts >= %(d_start)s AND x.ts < %(d_end)s AND x.ts <= p.t
    ORDER BY x.ts DESC, x.exchange DESC, x.trade_id DESC
    LIMIT 1
) tr ON true
LEFT JOIN book bk ON bk.t = p.t AND bk.sym = b.sym
ORDER BY p.t, b.sym;
