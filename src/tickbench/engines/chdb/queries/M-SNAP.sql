-- Every (t, sym) of T × B, LEFT JOINed (join_use_nulls: null where nothing precedes t) to
-- * its last trade by ASOF JOIN on D's trades cut to one per (sym, ts), the last by (exchange,
--   trade_id) (argMax), so the nearest ts <= t is the last trade in the total order;
-- * (nbb, nbo) over each venue's latest quote at t: every (t, sym, venue) ASOF JOINed to D's
--   quotes cut to one per (sym, exchange, ts), the greatest seq's.
WITH grid AS (
    SELECT t, sym
    FROM (SELECT arrayJoin({t_times:Array(DateTime64(6, 'UTC'))}) AS t) AS times
    CROSS JOIN (SELECT arrayJoin({b_syms:Array(String)}) AS sym) AS basket
)
SELECT g.t AS t, g.sym AS sym, lt.last_price AS last_price, lt.last_amount AS last_amount,
       bk.nbb AS nbb, bk.nbo AS nbo
FROM grid AS g
LEFT JOIN (
    SELECT gt.t AS t, gt.sym AS sym, tr.last.1 AS last_price, tr.last.2 AS last_amount
    FROM grid AS gt
    ASOF INNER JOIN (
        SELECT sym, ts, argMax(tuple(price, amount), (exchange, trade_id)) AS last
        FROM trades
        WHERE sym IN {b_syms:Array(String)}
          AND ts >= {d_start:DateTime64(6, 'UTC')} AND ts < {d_end:DateTime64(6, 'UTC')}
        GROUP BY sym, ts
    ) AS tr ON gt.sym = tr.sym AND gt.t >= tr.ts
) AS lt ON g.t = lt.t AND g.sym = lt.sym
LEFT JOIN (
    SELECT gv.t AS t, gv.sym AS sym, max(q.bid) AS nbb, min(q.ask) AS nbo
    FROM (
        SELECT grid.t AS t, grid.sym AS sym, v.exchange AS exchange
        FROM grid
        INNER JOIN (
            SELECT DISTINCT sym, exchange
            FROM quotes
            WHERE sym IN {b_syms:Array(String)}
              AND ts >= {d_start:DateTime64(6, 'UTC')} AND ts < {d_end:DateTime64(6, 'UTC')}
        ) AS v ON grid.sym = v.sym
    ) AS gv
    ASOF INNER JOIN (
        SELECT sym, exchange, ts, argMax(bid, seq) AS bid, argMax(ask, seq) AS ask
        FROM quotes
        WHERE sym IN {b_syms:Array(String)}
          AND ts >= {d_start:DateTime64(6, 'UTC')} AND ts < {d_end:DateTime64(6, 'UTC')}
        GROUP BY sym, exchange, ts
    ) AS q ON gv.sym = q.sym AND gv.exchange = q.exchange AND gv.t >= q.ts
    GROUP BY t, sym
) AS bk ON g.t = bk.t AND g.sym = bk.sym
ORDER BY t, sym
SETTINGS join_use_nulls = 1
