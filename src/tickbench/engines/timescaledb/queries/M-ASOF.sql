-- One ordered pass instead of a probe per trade (a LATERAL probe decompressed a batch per trade):
-- D's quotes and trades of B50 (each a scan of B50's batches of D's chunk) in one stream per
-- (sym, exchange), ordered by (ts, kind, seq) with a venue's quotes of a ts before its trades
-- (ts <= t is inclusive) and, among quotes of one ts, the greatest seq last. PostgreSQL has no
-- last_value(… IGNORE NULLS): the running count of quotes numbers each quote's run of rows, and
-- a trade takes the mid of its run's first row, its venue's latest quote; a trade before any
-- quote (count 0) drops out.
WITH ev AS (
    SELECT sym, exchange, ts, 0 AS kind, seq, (bid + ask) / 2 AS mid, NULL::double precision AS price
    FROM quotes
    WHERE sym = ANY(%(b50_syms)s::text[]) AND ts >= %(d_start)s AND ts < %(d_end)s
    UNION ALL
    SELECT sym, exchange, ts, 1, 0, NULL, price
    FROM trades
    WHERE sym = ANY(%(b50_syms)s::text[]) AND ts >= %(d_start)s AND ts < %(d_end)s
), runs AS (
    SELECT sym, exchange, ts, kind, seq, mid, price,
           count(mid) OVER (PARTITION BY sym, exchange ORDER BY ts, kind, seq ROWS UNBOUNDED PRECEDING) AS run
    FROM ev
), marked AS (
    SELECT sym, kind, run, price,
           first_value(mid) OVER (PARTITION BY sym, exchange, run ORDER BY ts, kind, seq) AS mid
    FROM runs
)
SELECT sym, count(*) AS n, avg(2 * abs(price - mid) / mid) AS eff_spread
FROM marked
WHERE kind = 1 AND run > 0
GROUP BY sym
ORDER BY sym;
