-- The consolidated book after each quote of D, without ASOF JOIN (DataFusion has none): the
-- steps are numbered in (ts, exchange, seq) order; each step is paired with every venue of its
-- instrument (a probe row), merged with the quotes, and a window per (sym, venue) in step order
-- carries the venue's latest bid and ask to each probe (last_value IGNORE NULLS; a quote sorts
-- before the probes of its own step). nbb/nbo are the probes' max bid/min ask per step; a change
-- is a step whose pair differs from the step before's (lag; the first step has none).
WITH q AS (
    SELECT sym, exchange, bid, ask,
           row_number() OVER (PARTITION BY sym ORDER BY ts, exchange, seq) AS step
    FROM quotes
    WHERE array_has($b_syms, sym) AND ts >= $d_start AND ts < $d_end
),
merged AS (
    SELECT sym, exchange, step, 0 AS probe, bid, ask FROM q
    UNION ALL
    SELECT q.sym, v.exchange, q.step, 1 AS probe, CAST(NULL AS DOUBLE) AS bid, CAST(NULL AS DOUBLE) AS ask
    FROM q JOIN (SELECT DISTINCT sym, exchange FROM q) v ON q.sym = v.sym
),
held AS (
    SELECT sym, step, probe,
           last_value(bid) IGNORE NULLS OVER (PARTITION BY sym, exchange ORDER BY step, probe
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS bid,
           last_value(ask) IGNORE NULLS OVER (PARTITION BY sym, exchange ORDER BY step, probe
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS ask
    FROM merged
),
book AS (
    SELECT sym, step, max(bid) AS nbb, min(ask) AS nbo FROM held WHERE probe = 1 GROUP BY sym, step
),
steps AS (
    SELECT sym, nbb, nbo,
           lag(nbb) OVER (PARTITION BY sym ORDER BY step) AS prev_nbb,
           lag(nbo) OVER (PARTITION BY sym ORDER BY step) AS prev_nbo
    FROM book
)
SELECT sym, count(*) AS n_changes, avg(nbo - nbb) AS mean_spread,
       CAST(sum(CASE WHEN nbo <= nbb THEN 1 ELSE 0 END) AS BIGINT) AS n_locked
FROM steps
WHERE (nbb IS DISTINCT FROM prev_nbb) OR (nbo IS DISTINCT FROM prev_nbo)
GROUP BY sym
ORDER BY sym;
