-- Each trade of B50 on D ASOF JOINed to its own venue's latest quote; several quotes can share
-- a ts, so the lookup compares (ts, seq) pairs (the greatest seq wins).
WITH tr AS (
    SELECT exchange, sym, ts, price FROM trades
    WHERE sym IN (SELECT unnest($b50_syms)) AND ts >= $d_start AND ts < $d_end
),
qu AS (
    SELECT exchange, sym, ts, seq, (bid + ask) / 2 AS mid FROM quotes
    WHERE sym IN (SELECT unnest($b50_syms)) AND ts >= $d_start AND ts < $d_end
)
SELECT tr.sym, count(*) AS n, avg(2 * abs(tr.price - qu.mid) / qu.mid) AS eff_spread
FROM tr
ASOF JOIN qu ON tr.exchange = qu.exchange AND tr.sym = qu.sym AND (tr.ts, 9223372036854775807) >= (qu.ts, qu.seq)
GROUP BY tr.sym
ORDER BY tr.sym;
