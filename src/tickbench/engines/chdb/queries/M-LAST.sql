-- Each (sym, exchange)'s latest quote over M by (ts, seq), argMax over that total order. Each
-- pair's last day in M is read from the pair_days projection (a few thousand rows per part), so
-- only the days that are some pair's last are read (the earliest of them bounds ts: a constant
-- the partition key prunes by), and in them only the granules of the pairs whose last day it is.
-- GROUP BY (sym, exchange) is a prefix of the table's ORDER BY: optimize_aggregation_in_order
-- aggregates each pair as its rows stream past in key order instead of hashing every row.
WITH last_days AS (
    SELECT sym, exchange, max(day) AS day
    FROM (
        SELECT sym, exchange, toDate(ts) AS day
        FROM quotes
        WHERE toDate(ts) >= toDate({m_start:DateTime64(6, 'UTC')}) AND toDate(ts) < toDate({m_end:DateTime64(6, 'UTC')})
        GROUP BY sym, exchange, day
    )
    GROUP BY sym, exchange
)
SELECT sym, exchange, latest.1 AS ts, latest.2 AS bid, latest.3 AS bsize, latest.4 AS ask, latest.5 AS asize
FROM (
    SELECT sym, exchange, argMax(tuple(ts, bid, bsize, ask, asize), (ts, seq)) AS latest
    FROM quotes
    WHERE ts >= toDateTime64((SELECT min(day) FROM last_days), 9, 'UTC') AND ts < {m_end:DateTime64(6, 'UTC')}
      AND (sym, exchange, toDate(ts)) IN (SELECT sym, exchange, day FROM last_days)
    GROUP BY sym, exchange
)
ORDER BY sym, exchange
SETTINGS optimize_aggregation_in_order = 1
