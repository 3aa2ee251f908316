-- Ten NBBO probes, each a bounded lookup per venue: every venue's latest snapshot at or before t
-- is looked for in the last minute, else the last hour, else the day so far, so a (probe, venue)
-- reads a row group or two (zone maps on the (sym, exchange, ts) order) whatever the day's
-- length. The ten last minutes are one scan (their OR is pushed into the scan's zone-map
-- filter), and each (probe, venue) pair takes the latest row of its own minute (a range join
-- and arg_max: an ASOF JOIN of 50 pairs runs as DuckDB's loop join, which pairs each probe with
-- every earlier row of the ten minutes and grows with the tick rate); the (probe, venue) pairs
-- that find nothing there look further back, each level's
-- bounds a scalar subquery that DuckDB pushes into its scan as a dynamic filter, so a level with
-- nothing to find reads no row group. The venues of S on X come from table venues, written with
-- the book at load (X is whole days).
WITH vs AS MATERIALIZED (
    SELECT DISTINCT exchange FROM venues
    WHERE sym = $sym AND day >= CAST($multi_start AS DATE) AND day < CAST($multi_end AS DATE)
),
pv AS MATERIALIZED (
    SELECT t, exchange FROM (SELECT unnest($nbbo_times) AS t) CROSS JOIN vs
),
m AS (
    SELECT exchange, ts, b1price, a1price FROM book
    WHERE sym = $sym AND ts >= $multi_start AND ts < $multi_end
      AND ((ts > $nbbo_times[1] - INTERVAL 1 MINUTE AND ts <= $nbbo_times[1])
         OR (ts > $nbbo_times[2] - INTERVAL 1 MINUTE AND ts <= $nbbo_times[2])
         OR (ts > $nbbo_times[3] - INTERVAL 1 MINUTE AND ts <= $nbbo_times[3])
         OR (ts > $nbbo_times[4] - INTERVAL 1 MINUTE AND ts <= $nbbo_times[4])
         OR (ts > $nbbo_times[5] - INTERVAL 1 MINUTE AND ts <= $nbbo_times[5])
         OR (ts > $nbbo_times[6] - INTERVAL 1 MINUTE AND ts <= $nbbo_times[6])
         OR (ts > $nbbo_times[7] - INTERVAL 1 MINUTE AND ts <= $nbbo_times[7])
         OR (ts > $nbbo_times[8] - INTERVAL 1 MINUTE AND ts <= $nbbo_times[8])
         OR (ts > $nbbo_times[9] - INTERVAL 1 MINUTE AND ts <= $nbbo_times[9])
         OR (ts > $nbbo_times[10] - INTERVAL 1 MINUTE AND ts <= $nbbo_times[10]))
),
q1 AS MATERIALIZED (
    SELECT pv.t, pv.exchange, max(m.ts) AS ts,
           arg_max(m.b1price, m.ts) AS b1price, arg_max(m.a1price, m.ts) AS a1price
    FROM pv LEFT JOIN m ON pv.exchange = m.exchange AND m.ts <= pv.t AND m.ts > pv.t - INTERVAL 1 MINUTE
    GROUP BY pv.t, pv.exchange
),
miss1 AS MATERIALIZED (
    SELECT t, exchange FROM q1 WHERE ts IS NULL
),
h AS (
    SELECT exchange, ts, b1price, a1price FROM book
    WHERE sym = $sym AND ts >= $multi_start AND ts < $multi_end
      AND ts > (SELECT coalesce(min(t), $multi_end) - INTERVAL 1 HOUR FROM miss1)
      AND ts <= (SELECT coalesce(max(t), $multi_start) FROM miss1)
),
q2 AS MATERIALIZED (
    SELECT miss1.t, miss1.exchange, h.ts, h.b1price, h.a1price
    FROM miss1 ASOF LEFT JOIN h ON miss1.exchange = h.exchange AND miss1.t >= h.ts
),
miss2 AS MATERIALIZED (
    SELECT t, exchange FROM q2 WHERE ts IS NULL OR ts <= t - INTERVAL 1 HOUR
),
d AS (
    SELECT exchange, ts, b1price, a1price FROM book
    WHERE sym = $sym AND ts >= $multi_start AND ts < $multi_end
      AND ts <= (SELECT coalesce(max(t), $multi_start - INTERVAL 1 MICROSECOND) FROM miss2)
),
q3 AS (
    SELECT miss2.t, d.b1price, d.a1price
    FROM miss2 ASOF JOIN d ON miss2.exchange = d.exchange AND miss2.t >= d.ts
)
SELECT t, max(b1price) AS nbb, min(a1price) AS nbo FROM (
    SELECT t, b1price, a1price FROM q1 WHERE ts IS NOT NULL
    UNION ALL
    SELECT t, b1price, a1price FROM q2 WHERE ts > t - INTERVAL 1 HOUR
    UNION ALL
    FROM q3
)
GROUP BY t
ORDER BY t;
