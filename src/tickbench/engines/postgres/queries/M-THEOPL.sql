-- No ASOF JOIN in PostgreSQL: P's trades are found on D by a join on (exchange, sym, trade_id),
-- then each horizon's mark is a backward probe of quotes' (sym, exchange, ts, seq) btree for the
-- trade's own venue at ts + h (the greatest (ts, seq), LIMIT 1), bounded to D's partition.
SELECT t.exchange, t.sym, t.trade_id, h.h,
       CASE WHEN t.side = 'buy' THEN 1.0::float8 ELSE -1.0::float8 END * t.amount * (m.mid - t.price) AS pnl
FROM unnest(%(p_exchanges)s::text[], %(p_syms)s::text[], %(p_trade_ids)s::bigint[]) AS p(exchange, sym, trade_id)
JOIN trades t ON t.exchange = p.exchange AND t.sym = p.sym AND t.trade_id = p.trade_id
    AND t.ts >= %(d_start)s AND t.ts < %(d_end)s
CROSS JOIN unnest('{1,10,60,300}'::bigint[]) AS h(h)
CROSS JOIN LATERAL (
    SELECT (q.bid + q.ask) / 2 AS mid FROM quotes q
    WHERE q.sym = t.sym AND q.exchange = t.exchange
      AND q.ts >= %(d_start)s AND q.ts < %(d_end)s AND q.ts <= t.ts + make_interval(secs => h.h)
    ORDER BY q.ts DESC, q.seq DESC
    LIMIT 1
) m
ORDER BY t.exchange, t.sym, t.trade_id, h.h;
