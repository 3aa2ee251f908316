-- The venues S quotes on X, by a skip scan of X's partition's (sym, exchange, ts) index (one
-- descent per venue instead of reading the day), then each venue's latest snapshot on X at or
-- before t by a backward probe of the same index; a venue with none before t drops out.
WITH RECURSIVE venues(exchange) AS (
    (SELECT exchange FROM book
     WHERE sym = %(sym)s AND ts >= %(multi_start)s AND ts < %(multi_end)s
     ORDER BY exchange LIMIT 1)
    UNION ALL
    SELECT (SELECT b.exchange FROM book b
            WHERE b.sym = %(sym)s AND b.ts >= %(multi_start)s AND b.ts < %(multi_end)s AND b.exchange > v.exchange
            ORDER BY b.exchange LIMIT 1)
    FROM venues v WHERE v.exchange IS NOT NULL
)
SELECT p.t, max(l.b1price) AS nbb, min(l.a1price) AS nbo
FROM unnest(%(nbbo_times)s::timestamptz[]) AS p(t)
CROSS JOIN venues v
CROSS JOIN LATERAL (
    SELECT b1price, a1price
    FROM book
    WHERE sym = %(sym)s AND exchange = v.exchange
      AND ts >= %(multi_start)s AND ts < %(multi_end)s AND ts <= p.t
    ORDER BY ts DESC
    LIMIT 1
) l
GROUP BY p.t
ORDER BY p.t;
