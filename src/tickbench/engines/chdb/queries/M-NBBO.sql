-- M-NBBO's steps by ASOF JOIN: each quote of D is a step, numbered per instrument in (ts, exchange,
-- seq) order (pos); at each step every venue of the instrument is looked up ASOF by pos (its latest
-- quote so far, if any), and nbb/nbo are taken over those found. A change is the first step or a
-- step whose (nbb, nbo) differs from the step before (lagInFrame); nbb/nbo are never null here,
-- as the step's own venue always has a quote.
WITH q AS (
    SELECT sym, exchange, bid, ask, row_number() OVER (PARTITION BY sym ORDER BY ts, exchange, seq) AS pos
    FROM quotes
    WHERE sym IN {b_syms:Array(String)}
      AND ts >= {d_start:DateTime64(6, 'UTC')} AND ts < {d_end:DateTime64(6, 'UTC')}
),
steps AS (
    SELECT s.sym AS sym, s.pos AS pos, max(l.bid) AS nbb, min(l.ask) AS nbo
    FROM (
        SELECT q.sym AS sym, q.pos AS pos, v.exchange AS exchange
        FROM q INNER JOIN (SELECT DISTINCT sym, exchange FROM q) AS v ON q.sym = v.sym
    ) AS s
    ASOF INNER JOIN q AS l ON s.sym = l.sym AND s.exchange = l.exchange AND s.pos >= l.pos
    GROUP BY sym, pos
),
marked AS (
    SELECT sym, nbb, nbo,
           pos = 1 OR nbb != lagInFrame(nbb) OVER w OR nbo != lagInFrame(nbo) OVER w AS changed
    FROM steps
    WINDOW w AS (PARTITION BY sym ORDER BY pos ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
)
SELECT sym, countIf(changed) AS n_changes, avgIf(nbo - nbb, changed) AS mean_spread,
       countIf(changed AND nbo <= nbb) AS n_locked
FROM marked
GROUP BY sym
ORDER BY sym
