-- One probe per (time, venue), each matched by ASOF JOIN ON (exchange) to that venue's latest
-- snapshot; the probe times come from the `probes` table written at load.
WITH x AS (
    SELECT ts, exchange, b1price, a1price
    FROM book
    WHERE sym = $sym AND ts >= $multi_start AND ts < $multi_end
),
pv AS (
    (SELECT p.t, v.exchange
     FROM (probes WHERE qid = 'O-NBBO') p
     CROSS JOIN (SELECT DISTINCT exchange FROM x) v
     ORDER BY p.t) TIMESTAMP(t)
)
SELECT pv.t, max(x.b1price) AS nbb, min(x.a1price) AS nbo
FROM pv
ASOF JOIN x ON (exchange)
GROUP BY pv.t
ORDER BY pv.t;
