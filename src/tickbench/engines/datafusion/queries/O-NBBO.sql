-- Ten NBBO probes without ASOF JOIN (DataFusion has none): every venue's latest snapshot at or
-- before t is looked for in the minute before t, else in the day so far. The ten minutes are one
-- scan whose OR of ts ranges prunes row groups and pages by their statistics (the store is sorted
-- by (sym, exchange, ts): each venue's minute is a page or two). The day runs only for the
-- (probe, venue) pairs whose minute was empty: its scan is the probe side of a hash join whose
-- build side is those pairs, and DataFusion opens no file of a probe side when the build side is
-- empty. The latest row per pair is a window function (row_number over ts descending). The venues
-- of S on X, needed only to tell which pairs missed, come from table venues, written with the
-- book at load (X is whole days), so no read of S's day grows with the day. The probes are
-- unrolled (PROBES = 10).
WITH probes AS (
    SELECT column1 AS t FROM (VALUES
        ($nbbo_times[1]), ($nbbo_times[2]), ($nbbo_times[3]), ($nbbo_times[4]), ($nbbo_times[5]),
        ($nbbo_times[6]), ($nbbo_times[7]), ($nbbo_times[8]), ($nbbo_times[9]), ($nbbo_times[10]))
),
minute AS (
    SELECT exchange, ts, b1price, a1price FROM book
    WHERE sym = $sym AND ts >= $multi_start AND ts < $multi_end
      AND ((ts > $nbbo_times[1] - INTERVAL '1 minute' AND ts <= $nbbo_times[1])
           OR (ts > $nbbo_times[2] - INTERVAL '1 minute' AND ts <= $nbbo_times[2])
           OR (ts > $nbbo_times[3] - INTERVAL '1 minute' AND ts <= $nbbo_times[3])
           OR (ts > $nbbo_times[4] - INTERVAL '1 minute' AND ts <= $nbbo_times[4])
           OR (ts > $nbbo_times[5] - INTERVAL '1 minute' AND ts <= $nbbo_times[5])
           OR (ts > $nbbo_times[6] - INTERVAL '1 minute' AND ts <= $nbbo_times[6])
           OR (ts > $nbbo_times[7] - INTERVAL '1 minute' AND ts <= $nbbo_times[7])
           OR (ts > $nbbo_times[8] - INTERVAL '1 minute' AND ts <= $nbbo_times[8])
           OR (ts > $nbbo_times[9] - INTERVAL '1 minute' AND ts <= $nbbo_times[9])
           OR (ts > $nbbo_times[10] - INTERVAL '1 minute' AND ts <= $nbbo_times[10]))
),
found AS (
    SELECT p.t, m.exchange, m.ts, m.b1price, m.a1price
    FROM probes p JOIN minute m ON m.ts <= p.t AND m.ts > p.t - INTERVAL '1 minute'
),
missed AS (
    SELECT p.t, v.exchange, $sym AS sym
    FROM probes p CROSS JOIN (
        SELECT DISTINCT exchange FROM venues
        WHERE sym = $sym AND day >= CAST($multi_start AS DATE) AND day < CAST($multi_end AS DATE)
    ) v
    WHERE NOT EXISTS (SELECT 1 FROM found f WHERE f.t = p.t AND f.exchange = v.exchange)
),
before AS (
    SELECT missed.t, missed.exchange, b.ts, b.b1price, b.a1price
    FROM missed JOIN book b ON b.sym = missed.sym AND b.exchange = missed.exchange AND b.ts <= missed.t
    WHERE b.sym = $sym AND b.ts >= $multi_start AND b.ts < $multi_end
),
latest AS (
    SELECT t, b1price, a1price FROM (
        SELECT * FROM found
        UNION ALL
        SELECT * FROM before
    )
    QUALIFY row_number() OVER (PARTITION BY t, exchange ORDER BY ts DESC) = 1
)
SELECT t, max(b1price) AS nbb, min(a1price) AS nbo
FROM latest
GROUP BY t
ORDER BY t;
