-- Each (sym, exchange)'s latest quote over M by (ts, seq): argMax over the total order.
SELECT sym, exchange, latest.1 AS ts, latest.2 AS bid, latest.3 AS bsize, latest.4 AS ask, latest.5 AS asize
FROM (
    SELECT sym, exchange, argMax(tuple(ts, bid, bsize, ask, asize), (ts, seq)) AS latest
    FROM quotes
    WHERE ts >= {m_start:DateTime64(6, 'UTC')} AND ts < {m_end:DateTime64(6, 'UTC')}
    GROUP BY sym, exchange
)
ORDER BY sym, exchange
