-- The requests and their baskets as arrays (req, window; req, sym), each (req, sym) the
-- instrument's trade batches in D's chunk whose ts range meets its window; open and close by
-- ordered array_agg in the trade order (first()/last() order by ts alone, and trades can share one).
SELECT r.req, t.sym, count(*) AS n, sum(t.amount) AS volume, sum(t.price * t.amount) / sum(t.amount) AS vwap,
       (array_agg(t.price ORDER BY t.ts, t.exchange, t.trade_id))[1] AS open,
       max(t.price) AS high, min(t.price) AS low,
       (array_agg(t.price ORDER BY t.ts DESC, t.exchange DESC, t.trade_id DESC))[1] AS close,
       stddev_samp(t.price) AS sd
FROM unnest(%(ui_req)s::bigint[], %(ui_from)s::timestamptz[], %(ui_to)s::timestamptz[]) AS r(req, t_from, t_to)
JOIN unnest(%(ui_pair_req)s::bigint[], %(ui_pair_sym)s::text[]) AS b(req, sym) ON b.req = r.req
JOIN trades t ON t.sym = b.sym AND t.ts >= r.t_from AND t.ts < r.t_to
    AND t.ts >= %(d_start)s AND t.ts < %(d_end)s
GROUP BY r.req, t.sym
ORDER BY r.req, t.sym;
