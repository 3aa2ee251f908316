-- Ten point lookups, one per probe time t: S's latest snapshot at or before t in the month,
-- `ORDER BY ts DESC LIMIT 1` on the designated timestamp, which QuestDB runs as a backward
-- interval scan from t that stops at the first row of S (an ASOF JOIN of the probes scanned
-- the month forward from its start: its cost grew with the history before each probe).
SELECT * FROM (
    (SELECT CAST($ot_times_0 AS TIMESTAMP_NS) AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts <= $ot_times_0 ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT CAST($ot_times_1 AS TIMESTAMP_NS) AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts <= $ot_times_1 ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT CAST($ot_times_2 AS TIMESTAMP_NS) AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts <= $ot_times_2 ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT CAST($ot_times_3 AS TIMESTAMP_NS) AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts <= $ot_times_3 ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT CAST($ot_times_4 AS TIMESTAMP_NS) AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts <= $ot_times_4 ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT CAST($ot_times_5 AS TIMESTAMP_NS) AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts <= $ot_times_5 ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT CAST($ot_times_6 AS TIMESTAMP_NS) AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts <= $ot_times_6 ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT CAST($ot_times_7 AS TIMESTAMP_NS) AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts <= $ot_times_7 ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT CAST($ot_times_8 AS TIMESTAMP_NS) AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts <= $ot_times_8 ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT CAST($ot_times_9 AS TIMESTAMP_NS) AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts <= $ot_times_9 ORDER BY ts DESC LIMIT 1)
) ORDER BY t;
