-- Not a scan of the month: the (sym, exchange) pairs come from a skip scan of quotes'
-- (sym, exchange, ts, seq) btree (one descent per pair into each day's partition), then each
-- pair's latest quote is a backward probe (greatest (ts, seq), LIMIT 1) over the days appended
-- newest first, which stops in the last day on which the pair quoted.
WITH RECURSIVE pairs(sym, exchange) AS (
    (SELECT sym, exchange FROM quotes
     WHERE ts >= %(m_start)s AND ts < %(m_end)s
     ORDER BY sym, exchange LIMIT 1)
    UNION ALL
    SELECT n.sym, n.exchange
    FROM pairs p
    CROSS JOIN LATERAL (
        SELECT q.sym, q.exchange FROM quotes q
        WHERE (q.sym, q.exchange) > (p.sym, p.exchange) AND q.ts >= %(m_start)s AND q.ts < %(m_end)s
        ORDER BY q.sym, q.exchange LIMIT 1
    ) n
)
SELECT p.sym, p.exchange, l.ts, l.bid, l.bsize, l.ask, l.asize
FROM pairs p
CROSS JOIN LATERAL (
    SELECT q.ts, q.bid, q.bsize, q.ask, q.asize FROM quotes q
    WHERE q.sym = p.sym AND q.exchange = p.exchange AND q.ts >= %(m_start)s AND q.ts < %(m_end)s
    ORDER BY q.ts DESC, q.seq DESC
    LIMIT 1
) l
ORDER BY p.sym, p.exchange;
