-- P's trades (matched by sym and trade_id, then exactly by their (exchange, sym, trade_id) key:
-- QuestDB has no row values for IN), one probe per h at ts + h, ordered by the probe time and made
-- its designated timestamp; ASOF JOIN on (exchange, sym) finds the latest quote of the trade's own
-- venue at or before it among D's (the same day); among quotes of one ts the last stored, which is
-- the greatest seq (the load's order). A probe with no quote before it has no row.
WITH p AS (
    SELECT ts, exchange, sym, trade_id, side, price, amount FROM trades
    WHERE ts >= $d_start AND ts < $d_end AND sym IN ($p_syms) AND trade_id IN ($p_trade_ids)
      AND concat(length(exchange), ':', exchange, sym, ':', trade_id) IN ($p_keys)
),
probes AS (
    SELECT * FROM (
        SELECT dateadd('s', 1, ts) AS at, 1 AS h, exchange, sym, trade_id, side, price, amount FROM p
        UNION ALL
        SELECT dateadd('s', 10, ts) AS at, 10 AS h, exchange, sym, trade_id, side, price, amount FROM p
        UNION ALL
        SELECT dateadd('s', 60, ts) AS at, 60 AS h, exchange, sym, trade_id, side, price, amount FROM p
        UNION ALL
        SELECT dateadd('s', 300, ts) AS at, 300 AS h, exchange, sym, trade_id, side, price, amount FROM p
    ) ORDER BY at
)
SELECT x.exchange AS exchange, x.sym AS sym, x.trade_id AS trade_id, x.h AS h,
       CASE WHEN x.side = 'buy' THEN 1.0 ELSE -1.0 END * x.amount * ((q.bid + q.ask) / 2 - x.price) AS pnl
FROM (probes TIMESTAMP(at)) x
ASOF JOIN (SELECT ts, exchange, sym, bid, ask FROM quotes
           WHERE ts >= $d_start AND ts < $d_end AND sym IN ($p_syms)) q ON (exchange, sym)
WHERE q.ts IS NOT NULL
ORDER BY exchange, sym, trade_id, h;
