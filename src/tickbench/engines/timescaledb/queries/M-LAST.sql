-- Not a decompression of the month: the (sym, exchange) pairs of M and each one's last ts come
-- from one grouped pass over the chunks, grouped by the segment columns (each batch is one pair:
-- the vectorised aggregation reads ts alone); then each pair's latest quote is a probe of its own
-- batches at that ts, greatest seq first (several quotes of one venue can share a ts).
WITH pairs AS MATERIALIZED (
    SELECT sym, exchange, max(ts) AS last_ts
    FROM quotes
    WHERE ts >= %(m_start)s AND ts < %(m_end)s
    GROUP BY sym, exchange
)
SELECT p.sym, p.exchange, l.ts, l.bid, l.bsize, l.ask, l.asize
FROM pairs p
CROSS JOIN LATERAL (
    SELECT q.ts, q.bid, q.bsize, q.ask, q.asize FROM quotes q
    WHERE q.sym = p.sym AND q.exchange = p.exchange AND q.ts = p.last_ts
      AND q.ts >= %(m_start)s AND q.ts < %(m_end)s
    ORDER BY q.seq DESC
    LIMIT 1
) l
ORDER BY p.sym, p.exchange;
