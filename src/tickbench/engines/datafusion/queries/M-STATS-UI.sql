-- The ten requests as (req, sym, window) rows from the bound lists, joined to D's trades.
WITH req AS (
    SELECT unnest(CAST($ui_req AS BIGINT[])) AS req,
           arrow_cast(unnest(CAST($ui_from AS TIMESTAMP[])), 'Timestamp(Nanosecond, Some("UTC"))') AS t0,
           arrow_cast(unnest(CAST($ui_to AS TIMESTAMP[])), 'Timestamp(Nanosecond, Some("UTC"))') AS t1
),
pairs AS (
    SELECT p.req, p.sym, req.t0, req.t1
    FROM (SELECT unnest(CAST($ui_pair_req AS BIGINT[])) AS req, unnest(CAST($ui_pair_sym AS VARCHAR[])) AS sym) p
    JOIN req ON p.req = req.req
)
SELECT p.req, t.sym, count(*) AS n, sum(t.amount) AS volume, sum(t.price * t.amount) / sum(t.amount) AS vwap,
       first_value(t.price ORDER BY t.ts, t.exchange, t.trade_id) AS open, max(t.price) AS high,
       min(t.price) AS low, last_value(t.price ORDER BY t.ts, t.exchange, t.trade_id) AS close,
       stddev_samp(t.price) AS sd
FROM trades t
JOIN pairs p ON t.sym = p.sym AND t.ts >= p.t0 AND t.ts < p.t1
WHERE array_has($ui_pair_sym, t.sym) AND t.ts >= $d_open AND t.ts < $d_close
GROUP BY p.req, t.sym
ORDER BY p.req, t.sym;
