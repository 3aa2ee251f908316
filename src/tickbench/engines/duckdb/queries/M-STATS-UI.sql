-- The ten requests as (req, sym, window) rows from the bound lists, joined to D's trades.
WITH req AS (
    SELECT unnest($ui_req) AS req, CAST(unnest($ui_from) AS TIMESTAMP_NS) AS t0,
           CAST(unnest($ui_to) AS TIMESTAMP_NS) AS t1
),
pairs AS (
    SELECT p.req, p.sym, req.t0, req.t1
    FROM (SELECT unnest($ui_pair_req) AS req, unnest($ui_pair_sym) AS sym) p JOIN req USING (req)
)
SELECT p.req, t.sym, count(*) AS n, sum(t.amount) AS volume, sum(t.price * t.amount) / sum(t.amount) AS vwap,
       arg_min(t.price, (t.ts, t.exchange, t.trade_id)) AS open, max(t.price) AS high, min(t.price) AS low,
       arg_max(t.price, (t.ts, t.exchange, t.trade_id)) AS close, stddev_samp(t.price) AS sd
FROM trades t
JOIN pairs p ON t.sym = p.sym AND t.ts >= p.t0 AND t.ts < p.t1
WHERE t.sym IN (SELECT unnest($ui_pair_sym)) AND t.ts >= $d_open AND t.ts < $d_close
GROUP BY p.req, t.sym
ORDER BY p.req, t.sym;
