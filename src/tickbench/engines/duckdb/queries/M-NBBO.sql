-- The consolidated book after each quote of D (SPEC §2.3's steps, in (ts, exchange, seq) order):
-- every step is paired with each venue of its instrument, and an ASOF JOIN on the step number
-- finds that venue's latest quote so far; nbb/nbo are their max bid/min ask, and a step is a
-- change where they differ from the step before (lag; the first step has none, so it counts).
WITH q AS MATERIALIZED (
    SELECT sym, exchange, bid, ask,
           row_number() OVER (PARTITION BY sym ORDER BY ts, exchange, seq) AS step
    FROM quotes
    WHERE sym IN (SELECT unnest($b_syms)) AND ts >= $d_start AND ts < $d_end
),
venues AS (SELECT DISTINCT sym, exchange FROM q),
book AS (
    SELECT s.sym, s.step, max(l.bid) AS nbb, min(l.ask) AS nbo
    FROM (SELECT q.sym, q.step, v.exchange FROM q JOIN venues v USING (sym)) s
    ASOF JOIN q l ON s.sym = l.sym AND s.exchange = l.exchange AND s.step >= l.step
    GROUP BY s.sym, s.step
),
changes AS (
    SELECT sym, nbb, nbo
    FROM book
    WINDOW w AS (PARTITION BY sym ORDER BY step)
    QUALIFY nbb IS DISTINCT FROM lag(nbb) OVER w OR nbo IS DISTINCT FROM lag(nbo) OVER w
)
SELECT sym, count(*) AS n_changes, avg(nbo - nbb) AS mean_spread, count(*) FILTER (WHERE nbo <= nbb) AS n_locked
FROM changes
GROUP BY sym
ORDER BY sym;
