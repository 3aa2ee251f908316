-- Per time t, the latest snapshot of S at or before t on any venue, from M's start: each probe
-- by pg_temp.book_at (lookups.sql), which plans one lookup per widening window (a minute, an
-- hour, a day before t, then all of M) with the window as literals, so partition pruning keeps
-- one or two of M's days at plan time, not all 30 (a backward probe of the (sym, ts) btree each).
SELECT p.t, l.ts, l.b1price, l.b1size, l.a1price, l.a1size
FROM unnest(%(ot_times)s::timestamptz[]) AS p(t)
CROSS JOIN LATERAL pg_temp.book_at(%(sym)s, p.t, %(month_start)s) AS l
ORDER BY p.t;
