-- O-T in one scan: the ten probes' one-minute windows are one OR'ed filter, which DuckDB pushes
-- into the scan, so only the row groups holding those minutes are read (zone maps on the
-- (sym, exchange, ts) order) whatever the history's length; an ASOF LEFT JOIN of the probes to
-- those rows gives each probe its latest one. A probe whose minute is empty (no probe of seed 7
-- at SF 0.05, 0.2 or 1) looks back in a second scan, from the latest snapshot an earlier probe
-- found (the month's start for none) to the last such probe: its bounds are scalar subqueries
-- that DuckDB pushes into the scan as dynamic filters, so with no such probe it reads no row
-- group. The previous form, ten unrolled lookups each with a scalar subquery choosing its
-- window, read every probe's row groups twice.
WITH probes AS MATERIALIZED (SELECT unnest($ot_times) AS t),
m AS (
    SELECT ts, b1price, b1size, a1price, a1size FROM book
    WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
      AND ((ts > $ot_times[1] - INTERVAL 1 MINUTE AND ts <= $ot_times[1])
         OR (ts > $ot_times[2] - INTERVAL 1 MINUTE AND ts <= $ot_times[2])
         OR (ts > $ot_times[3] - INTERVAL 1 MINUTE AND ts <= $ot_times[3])
         OR (ts > $ot_times[4] - INTERVAL 1 MINUTE AND ts <= $ot_times[4])
         OR (ts > $ot_times[5] - INTERVAL 1 MINUTE AND ts <= $ot_times[5])
         OR (ts > $ot_times[6] - INTERVAL 1 MINUTE AND ts <= $ot_times[6])
         OR (ts > $ot_times[7] - INTERVAL 1 MINUTE AND ts <= $ot_times[7])
         OR (ts > $ot_times[8] - INTERVAL 1 MINUTE AND ts <= $ot_times[8])
         OR (ts > $ot_times[9] - INTERVAL 1 MINUTE AND ts <= $ot_times[9])
         OR (ts > $ot_times[10] - INTERVAL 1 MINUTE AND ts <= $ot_times[10]))
),
q1 AS MATERIALIZED (
    SELECT probes.t, m.ts, m.b1price, m.b1size, m.a1price, m.a1size
    FROM probes ASOF LEFT JOIN m ON probes.t >= m.ts
),
hit AS MATERIALIZED (SELECT * FROM q1 WHERE ts > t - INTERVAL 1 MINUTE),
miss AS MATERIALIZED (SELECT t FROM q1 WHERE ts IS NULL OR ts <= t - INTERVAL 1 MINUTE),
back AS (
    SELECT ts, b1price, b1size, a1price, a1size FROM book
    WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
      AND ts >= (SELECT coalesce(max(ts), $month_start) FROM hit WHERE t < (SELECT min(t) FROM miss))
      AND ts <= (SELECT coalesce(max(t), $month_start - INTERVAL 1 MICROSECOND) FROM miss)
),
q2 AS (
    SELECT miss.t, back.ts, back.b1price, back.b1size, back.a1price, back.a1size
    FROM miss ASOF JOIN back ON miss.t >= back.ts
)
SELECT * FROM hit
UNION ALL
SELECT * FROM q2
ORDER BY t;
