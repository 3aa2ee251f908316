-- M-NBBO's steps by window functions over the basket's quotes of D in storage order, which is
-- (ts, exchange, seq) (the load's): each venue's latest bid and ask so far (last_value … IGNORE
-- NULLS per venue: QuestDB has no pivot of a window, so the columns are made once per venue of
-- the dataset's calendar by <<venues: …>>, b_0/a_0 for the first venue and so on), nbb and nbo as
-- greatest()/least() of them (which skip nulls: a venue with no quote yet), and a change where
-- they differ from the step before (lag) or at the sym's first step.
SELECT sym, count() AS n_changes, avg(nbo - nbb) AS mean_spread,
       sum(CASE WHEN nbo <= nbb THEN 1 ELSE 0 END) AS n_locked
FROM (
    SELECT sym, nbb, nbo,
           row_number() OVER (PARTITION BY sym ORDER BY ts) AS step,
           lag(nbb) OVER (PARTITION BY sym ORDER BY ts) AS prev_nbb,
           lag(nbo) OVER (PARTITION BY sym ORDER BY ts) AS prev_nbo
    FROM (
        SELECT sym, ts, greatest(<<venues: b_@i>>) AS nbb, least(<<venues: a_@i>>) AS nbo
        FROM (
            SELECT sym, ts, <<venues:
           last_value(CASE WHEN exchange = $item THEN bid END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS b_@i,
           last_value(CASE WHEN exchange = $item THEN ask END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS a_@i>>
            FROM quotes
            WHERE ts >= $d_start AND ts < $d_end AND sym IN ($b_syms)
        )
    )
)
WHERE step = 1 OR nbb <> prev_nbb OR nbo <> prev_nbo
ORDER BY sym;
