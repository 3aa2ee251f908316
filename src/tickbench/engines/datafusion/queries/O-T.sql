-- Ten point lookups without ASOF JOIN (DataFusion has none): each probe's latest snapshot at or
-- before t is looked for in the minute before t, else in the month so far. The ten minutes are
-- one scan whose OR of ts ranges (literals once the parameters are bound) prunes files, row
-- groups and pages by their min/max statistics, so a probe reads a page or two of one day's file
-- whatever the history's length. The month runs only for the probes whose minute was empty: its
-- scan is the probe side of a hash join whose build side is those probes, and DataFusion opens no
-- file of a probe side when the build side is empty. The latest row per probe is a window
-- function (row_number over ts descending). The probes are unrolled (PROBES = 10).
WITH probes AS (
    SELECT column1 AS t, $sym AS sym FROM (VALUES
        ($ot_times[1]), ($ot_times[2]), ($ot_times[3]), ($ot_times[4]), ($ot_times[5]),
        ($ot_times[6]), ($ot_times[7]), ($ot_times[8]), ($ot_times[9]), ($ot_times[10]))
),
minute AS (
    SELECT ts, b1price, b1size, a1price, a1size FROM book
    WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
      AND ((ts > $ot_times[1] - INTERVAL '1 minute' AND ts <= $ot_times[1])
           OR (ts > $ot_times[2] - INTERVAL '1 minute' AND ts <= $ot_times[2])
           OR (ts > $ot_times[3] - INTERVAL '1 minute' AND ts <= $ot_times[3])
           OR (ts > $ot_times[4] - INTERVAL '1 minute' AND ts <= $ot_times[4])
           OR (ts > $ot_times[5] - INTERVAL '1 minute' AND ts <= $ot_times[5])
           OR (ts > $ot_times[6] - INTERVAL '1 minute' AND ts <= $ot_times[6])
           OR (ts > $ot_times[7] - INTERVAL '1 minute' AND ts <= $ot_times[7])
           OR (ts > $ot_times[8] - INTERVAL '1 minute' AND ts <= $ot_times[8])
           OR (ts > $ot_times[9] - INTERVAL '1 minute' AND ts <= $ot_times[9])
           OR (ts > $ot_times[10] - INTERVAL '1 minute' AND ts <= $ot_times[10]))
),
found AS (
    SELECT p.t, m.ts, m.b1price, m.b1size, m.a1price, m.a1size
    FROM probes p JOIN minute m ON m.ts <= p.t AND m.ts > p.t - INTERVAL '1 minute'
),
missed AS (
    SELECT t, sym FROM probes WHERE t NOT IN (SELECT t FROM found)
),
before AS (
    SELECT missed.t, b.ts, b.b1price, b.b1size, b.a1price, b.a1size
    FROM missed JOIN book b ON b.sym = missed.sym AND b.ts <= missed.t
    WHERE b.sym = $sym AND b.ts >= $month_start AND b.ts < $month_end
)
SELECT t, ts, b1price, b1size, a1price, a1size FROM (
    SELECT * FROM found
    UNION ALL
    SELECT * FROM before
)
QUALIFY row_number() OVER (PARTITION BY t ORDER BY ts DESC) = 1
ORDER BY t;
