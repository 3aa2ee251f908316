-- Not a decompression of the month: each instrument's venues in M by SkipScan over the compressed
-- chunks' segment indexes (nothing decompressed), then each (sym, exchange)'s latest quote from
-- its own batches, the chunks newest first (ordered ChunkAppend: the probe stops in the last day
-- on which the pair quoted), greatest (ts, seq) first, LIMIT 1.
WITH pairs AS MATERIALIZED (
    SELECT i.sym, v.exchange
    FROM instruments i
    CROSS JOIN LATERAL (
        SELECT DISTINCT q.exchange FROM quotes q
        WHERE q.sym = i.sym AND q.ts >= %(m_start)s AND q.ts < %(m_end)s
    ) v
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
