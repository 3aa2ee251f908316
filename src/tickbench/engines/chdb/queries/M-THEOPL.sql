-- P's trades (matched as (exchange, sym, trade_id) triples against the bound parallel arrays),
-- each at ts + h for h in 1, 10, 60, 300 s, ASOF JOINed to its own venue's quotes of D cut to
-- one per (exchange, sym, ts) (the greatest seq's), so the mark is the latest quote by (ts, seq).
SELECT t.exchange AS exchange, t.sym AS sym, t.trade_id AS trade_id, t.h AS h,
       if(t.side = 'buy', 1., -1.) * t.amount * ((q.bid + q.ask) / 2 - t.price) AS pnl
FROM (
    SELECT exchange, sym, trade_id, side, price, amount, toInt64(arrayJoin([1, 10, 60, 300])) AS h,
           ts + toIntervalSecond(h) AS at
    FROM trades
    WHERE sym IN {p_syms:Array(String)}
      AND ts >= {d_start:DateTime64(6, 'UTC')} AND ts < {d_end:DateTime64(6, 'UTC')}
      AND (exchange, sym, trade_id) IN arrayZip({p_exchanges:Array(String)}, {p_syms:Array(String)},
                                                {p_trade_ids:Array(Int64)})
) AS t
ASOF INNER JOIN (
    SELECT sym, exchange, ts, argMax(bid, seq) AS bid, argMax(ask, seq) AS ask
    FROM quotes
    WHERE sym IN {p_syms:Array(String)}
      AND ts >= {d_start:DateTime64(6, 'UTC')} AND ts < {d_end:DateTime64(6, 'UTC')}
    GROUP BY sym, exchange, ts
) AS q ON t.sym = q.sym AND t.exchange = q.exchange AND t.at >= q.ts
ORDER BY exchange, sym, trade_id, h
