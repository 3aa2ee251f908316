-- One probe per (time, venue), each matched by ASOF to that venue's latest snapshot.
WITH x AS (
    SELECT exchange, ts, b1price, a1price
    FROM book
    WHERE sym = $sym AND ts >= $multi_start AND ts < $multi_end
),
probes AS (
    SELECT t, exchange
    FROM (SELECT unnest($nbbo_times) AS t) CROSS JOIN (SELECT DISTINCT exchange FROM x)
)
SELECT p.t, max(x.b1price) AS nbb, min(x.a1price) AS nbo
FROM probes p
ASOF JOIN x ON p.exchange = x.exchange AND p.t >= x.ts
GROUP BY p.t
ORDER BY p.t;
