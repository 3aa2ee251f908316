-- Mark-outs: each trade of P at ts + h, ASOF JOINed to its own venue's quotes of D; several
-- quotes can share a ts, so the lookup compares (ts, seq) pairs (the greatest seq wins).
WITH p AS (
    SELECT unnest($p_exchanges) AS exchange, unnest($p_syms) AS sym, unnest($p_trade_ids) AS trade_id
),
tr AS (
    SELECT t.exchange, t.sym, t.trade_id, t.ts, t.side, t.price, t.amount
    FROM trades t JOIN p USING (exchange, sym, trade_id)
    WHERE t.sym IN (SELECT unnest($p_syms)) AND t.ts >= $d_start AND t.ts < $d_end
),
probes AS (
    SELECT tr.*, h, tr.ts + to_seconds(h) AS at
    FROM tr CROSS JOIN (SELECT unnest([1, 10, 60, 300]) AS h)
),
qu AS (
    SELECT exchange, sym, ts, seq, bid, ask FROM quotes
    WHERE sym IN (SELECT unnest($p_syms)) AND ts >= $d_start AND ts < $d_end
)
SELECT pr.exchange, pr.sym, pr.trade_id, pr.h,
       (CASE WHEN pr.side = 'buy' THEN 1.0 ELSE -1.0 END) * pr.amount * ((qu.bid + qu.ask) / 2 - pr.price) AS pnl
FROM probes pr
ASOF JOIN qu ON pr.exchange = qu.exchange AND pr.sym = qu.sym AND (pr.at, 9223372036854775807) >= (qu.ts, qu.seq)
ORDER BY pr.exchange, pr.sym, pr.trade_id, pr.h;
