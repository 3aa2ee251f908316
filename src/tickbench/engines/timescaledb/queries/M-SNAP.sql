-- Each instrument's venues on D by SkipScan over D's compressed chunk's segment index (one
-- descent per venue, nothing decompressed); each venue's latest quote at t from its own batches,
-- newest first (the greatest (ts, seq), LIMIT 1); each (t, sym)'s last trade at or before t from
-- the instrument's trade batches, newest first in the trade order. Every range names D's bounds
-- as literals, so D's chunk is the only one planned.
WITH venues AS MATERIALIZED (
    SELECT b.sym, v.exchange
    FROM unnest(%(b_syms)s::text[]) AS b(sym)
    CROSS JOIN LATERAL (
        SELECT DISTINCT q.exchange FROM quotes q
        WHERE q.sym = b.sym AND q.ts >= %(d_start)s AND q.ts < %(d_end)s
    ) v
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
