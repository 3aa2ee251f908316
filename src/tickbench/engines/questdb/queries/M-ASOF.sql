-- ASOF JOIN on (sym, exchange): each trade with its own venue's latest quote at or before its ts,
-- both sides restricted to D (the same day) and to B50; among quotes of one ts the last stored,
-- the greatest seq (the load's order). An unmatched trade has a null quote and is left out.
SELECT t.sym AS sym, count() AS n, avg(2 * abs(t.price - (q.bid + q.ask) / 2) / ((q.bid + q.ask) / 2)) AS eff_spread
FROM (SELECT ts, exchange, sym, price FROM trades
      WHERE ts >= $d_start AND ts < $d_end AND sym IN ($b50_syms)) t
ASOF JOIN (SELECT ts, exchange, sym, bid, ask FROM quotes
           WHERE ts >= $d_start AND ts < $d_end AND sym IN ($b50_syms)) q ON (sym, exchange)
WHERE q.ts IS NOT NULL
ORDER BY sym;
