-- Quote by quote with window functions, as on PostgreSQL (no per-venue state across rows): each
-- step k (the quote's place in (ts, exchange, seq) order) is crossed with the instrument's
-- venues, a venue's latest (bid, ask) after step k is the running max of ARRAY[k, bid, ask] over
-- its own quotes (the latest has the largest k), (nbb, nbo) are the max bid and min ask over the
-- venues at k, and a change is a step whose (nbb, nbo) is distinct from the step before's.
WITH steps AS (
    SELECT sym, exchange, bid, ask, row_number() OVER (PARTITION BY sym ORDER BY ts, exchange, seq) AS k
    FROM quotes
    WHERE sym = ANY(%(b_syms)s::text[]) AND ts >= %(d_start)s AND ts < %(d_end)s
),
venues AS (
    SELECT DISTINCT sym, exchange FROM steps
),
held AS (
    SELECT s.sym, s.k,
           max(CASE WHEN s.exchange = v.exchange THEN ARRAY[s.k, s.bid, s.ask] END)
               OVER (PARTITION BY s.sym, v.exchange ORDER BY s.k) AS latest
    FROM steps s
    JOIN venues v ON v.sym = s.sym
),
nbbo AS (
    SELECT sym, k, max(latest[2]) AS nbb, min(latest[3]) AS nbo
    FROM held
    GROUP BY sym, k
),
changes AS (
    SELECT sym, nbb, nbo,
           (nbb, nbo) IS DISTINCT FROM (lag(nbb) OVER w, lag(nbo) OVER w) AS changed
    FROM nbbo
    WINDOW w AS (PARTITION BY sym ORDER BY k)
)
SELECT sym, count(*) AS n_changes, avg(nbo - nbb) AS mean_spread,
       count(*) FILTER (WHERE nbo <= nbb) AS n_locked
FROM changes
WHERE changed
GROUP BY sym
ORDER BY sym;
