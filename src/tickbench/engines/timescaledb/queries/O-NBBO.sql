-- The venues of S on X by SkipScan over the compressed chunk's segment index (one descent per
-- distinct exchange, nothing decompressed), then each venue's latest snapshot at or before t
-- (newest-first batches, LIMIT 1); a venue with none before t drops out of the LATERAL join.
WITH venues AS MATERIALIZED (
    SELECT DISTINCT exchange
    FROM book
    WHERE sym = %(sym)s AND ts >= %(multi_start)s AND ts < %(multi_end)s
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
