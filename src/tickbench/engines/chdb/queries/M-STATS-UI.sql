-- The ten requests as (req, sym) pairs joined to D's trades of their instruments (the pairs are the
-- join's small right side), each request's window [from, to) picked from the bound arrays by req;
-- the windows' span bounds the read (the primary key's ts range).
SELECT r.req AS req, t.sym AS sym, count() AS n, sum(t.amount) AS volume,
       sum(t.price * t.amount) / sum(t.amount) AS vwap,
       argMin(t.price, (t.ts, t.exchange, t.trade_id)) AS open, max(t.price) AS high, min(t.price) AS low,
       argMax(t.price, (t.ts, t.exchange, t.trade_id)) AS close,
       if(count() > 1, stddevSampStable(t.price), NULL) AS sd
FROM trades AS t
INNER JOIN (
    SELECT pair.1 AS req, pair.2 AS sym,
           {ui_from:Array(DateTime64(6, 'UTC'))}[pair.1 + 1] AS t_from,
           {ui_to:Array(DateTime64(6, 'UTC'))}[pair.1 + 1] AS t_to
    FROM (SELECT arrayJoin(arrayZip({ui_pair_req:Array(Int64)}, {ui_pair_sym:Array(String)})) AS pair)
) AS r ON t.sym = r.sym
WHERE t.sym IN {ui_pair_sym:Array(String)}
  AND t.ts >= arrayMin({ui_from:Array(DateTime64(6, 'UTC'))}) AND t.ts < arrayMax({ui_to:Array(DateTime64(6, 'UTC'))})
  AND t.ts >= r.t_from AND t.ts < r.t_to
GROUP BY req, sym
ORDER BY req, sym
