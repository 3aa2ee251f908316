-- Per time t, the latest snapshot of S at or before t on any venue: an ordered ChunkAppend
-- walks M's chunks newest first and excludes those after t at run time (t is a parameter of
-- the LATERAL subquery); within a chunk the batches are merged in ts DESC order (orderby ts
-- DESC, so each batch starts with its newest row) and LIMIT 1 stops at the first row <= t.
SELECT p.t, l.ts, l.b1price, l.b1size, l.a1price, l.a1size
FROM unnest(%(ot_times)s::timestamptz[]) AS p(t)
CROSS JOIN LATERAL (
    SELECT ts, b1price, b1size, a1price, a1size
    FROM book
    WHERE sym = %(sym)s AND ts >= %(month_start)s AND ts < %(month_end)s AND ts <= p.t
    ORDER BY ts DESC
    LIMIT 1
) l
ORDER BY p.t;
