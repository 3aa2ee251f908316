-- The latest snapshot at or before t per venue (a backward btree probe each), then the latest
-- of those: "any exchange" without scanning the month. The venues of S come from a skip scan
-- of the (sym, exchange, ts) index (one descent per venue).
WITH RECURSIVE venues(exchange) AS (
    (SELECT exchange FROM book WHERE sym = %(sym)s ORDER BY exchange LIMIT 1)
    UNION ALL
    SELECT (SELECT b.exchange FROM book b WHERE b.sym = %(sym)s AND b.exchange > v.exchange
            ORDER BY b.exchange LIMIT 1)
    FROM venues v WHERE v.exchange IS NOT NULL
)
SELECT DISTINCT ON (p.t) p.t, l.ts, l.b1price, l.b1size, l.a1price, l.a1size
FROM unnest(%(ot_times)s::timestamptz[]) AS p(t)
CROSS JOIN venues v
CROSS JOIN LATERAL (
    SELECT ts, b1price, b1size, a1price, a1size
    FROM book
    WHERE sym = %(sym)s AND exchange = v.exchange
      AND ts >= %(month_start)s AND ts < %(month_end)s AND ts <= p.t
    ORDER BY ts DESC
    LIMIT 1
) l
ORDER BY p.t, l.ts DESC;
