-- One probe per (time, venue), each matched by ASOF to that venue's latest snapshot.
WITH x AS (
    SELECT exchange, ts, b1price, a1price
    FROM book
    WHERE sym = {sym:String} AND ts >= {multi_start:DateTime64(6, 'UTC')} AND ts < {multi_end:DateTime64(6, 'UTC')}
)
SELECT p.t AS t, max(x.b1price) AS nbb, min(x.a1price) AS nbo
FROM (
    SELECT arrayJoin({nbbo_times:Array(DateTime64(6, 'UTC'))}) AS t, exchange
    FROM (SELECT DISTINCT exchange FROM x)
) AS p
ASOF JOIN x ON p.exchange = x.exchange AND p.t >= x.ts
GROUP BY t
ORDER BY t
