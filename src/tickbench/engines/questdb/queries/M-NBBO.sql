-- M-NBBO's steps by window functions over the basket's quotes of D in storage order, which is
-- (ts, exchange, seq) (the load's): each venue's latest bid and ask so far (last_value … IGNORE
-- NULLS per venue: QuestDB has no pivot of a window, so the calendar's eight venues are named),
-- nbb and nbo as greatest()/least() of them (which skip nulls: a venue with no quote yet), and a
-- change where they differ from the step before (lag) or at the sym's first step.
SELECT sym, count() AS n_changes, avg(nbo - nbb) AS mean_spread,
       sum(CASE WHEN nbo <= nbb THEN 1 ELSE 0 END) AS n_locked
FROM (
    SELECT sym, nbb, nbo,
           row_number() OVER (PARTITION BY sym ORDER BY ts) AS step,
           lag(nbb) OVER (PARTITION BY sym ORDER BY ts) AS prev_nbb,
           lag(nbo) OVER (PARTITION BY sym ORDER BY ts) AS prev_nbo
    FROM (
        SELECT sym, ts, greatest(b_xnys, b_xnas, b_arcx, b_bats, b_edgx, b_iexg, b_memx, b_xbos) AS nbb,
               least(a_xnys, a_xnas, a_arcx, a_bats, a_edgx, a_iexg, a_memx, a_xbos) AS nbo
        FROM (
            SELECT sym, ts,
           last_value(CASE WHEN exchange = 'XNYS' THEN bid END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS b_xnys,
           last_value(CASE WHEN exchange = 'XNYS' THEN ask END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS a_xnys,
           last_value(CASE WHEN exchange = 'XNAS' THEN bid END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS b_xnas,
           last_value(CASE WHEN exchange = 'XNAS' THEN ask END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS a_xnas,
           last_value(CASE WHEN exchange = 'ARCX' THEN bid END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS b_arcx,
           last_value(CASE WHEN exchange = 'ARCX' THEN ask END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS a_arcx,
           last_value(CASE WHEN exchange = 'BATS' THEN bid END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS b_bats,
           last_value(CASE WHEN exchange = 'BATS' THEN ask END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS a_bats,
           last_value(CASE WHEN exchange = 'EDGX' THEN bid END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS b_edgx,
           last_value(CASE WHEN exchange = 'EDGX' THEN ask END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS a_edgx,
           last_value(CASE WHEN exchange = 'IEXG' THEN bid END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS b_iexg,
           last_value(CASE WHEN exchange = 'IEXG' THEN ask END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS a_iexg,
           last_value(CASE WHEN exchange = 'MEMX' THEN bid END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS b_memx,
           last_value(CASE WHEN exchange = 'MEMX' THEN ask END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS a_memx,
           last_value(CASE WHEN exchange = 'XBOS' THEN bid END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS b_xbos,
           last_value(CASE WHEN exchange = 'XBOS' THEN ask END) IGNORE NULLS OVER (PARTITION BY sym ORDER BY ts ROWS UNBOUNDED PRECEDING) AS a_xbos
            FROM quotes
            WHERE ts >= $d_start AND ts < $d_end AND sym IN ($b_syms)
        )
    )
)
WHERE step = 1 OR nbb <> prev_nbb OR nbo <> prev_nbo
ORDER BY sym;
