-- Per probe time t: each venue's latest snapshot of S at or before t in the day, by
-- `LATEST ON ts PARTITION BY exchange` (QuestDB's idiom for the last row per key: a backward
-- scan from t over the filtered rows that stops once every venue has its row), then the max bid
-- and min ask over the venues. The ten probes are unrolled under UNION ALL, as O-T's. The ASOF
-- JOIN of probes × venues it replaced read S's whole day: it grew with the day's rows.
SELECT * FROM (
    (SELECT CAST($nbbo_times_0 AS TIMESTAMP_NS) AS t, max(b1price) AS nbb, min(a1price) AS nbo FROM (
        SELECT ts, exchange, b1price, a1price FROM book
        WHERE sym = $sym AND ts >= $multi_start AND ts <= $nbbo_times_0
        LATEST ON ts PARTITION BY exchange))
    UNION ALL
    (SELECT CAST($nbbo_times_1 AS TIMESTAMP_NS) AS t, max(b1price) AS nbb, min(a1price) AS nbo FROM (
        SELECT ts, exchange, b1price, a1price FROM book
        WHERE sym = $sym AND ts >= $multi_start AND ts <= $nbbo_times_1
        LATEST ON ts PARTITION BY exchange))
    UNION ALL
    (SELECT CAST($nbbo_times_2 AS TIMESTAMP_NS) AS t, max(b1price) AS nbb, min(a1price) AS nbo FROM (
        SELECT ts, exchange, b1price, a1price FROM book
        WHERE sym = $sym AND ts >= $multi_start AND ts <= $nbbo_times_2
        LATEST ON ts PARTITION BY exchange))
    UNION ALL
    (SELECT CAST($nbbo_times_3 AS TIMESTAMP_NS) AS t, max(b1price) AS nbb, min(a1price) AS nbo FROM (
        SELECT ts, exchange, b1price, a1price FROM book
        WHERE sym = $sym AND ts >= $multi_start AND ts <= $nbbo_times_3
        LATEST ON ts PARTITION BY exchange))
    UNION ALL
    (SELECT CAST($nbbo_times_4 AS TIMESTAMP_NS) AS t, max(b1price) AS nbb, min(a1price) AS nbo FROM (
        SELECT ts, exchange, b1price, a1price FROM book
        WHERE sym = $sym AND ts >= $multi_start AND ts <= $nbbo_times_4
        LATEST ON ts PARTITION BY exchange))
    UNION ALL
    (SELECT CAST($nbbo_times_5 AS TIMESTAMP_NS) AS t, max(b1price) AS nbb, min(a1price) AS nbo FROM (
        SELECT ts, exchange, b1price, a1price FROM book
        WHERE sym = $sym AND ts >= $multi_start AND ts <= $nbbo_times_5
        LATEST ON ts PARTITION BY exchange))
    UNION ALL
    (SELECT CAST($nbbo_times_6 AS TIMESTAMP_NS) AS t, max(b1price) AS nbb, min(a1price) AS nbo FROM (
        SELECT ts, exchange, b1price, a1price FROM book
        WHERE sym = $sym AND ts >= $multi_start AND ts <= $nbbo_times_6
        LATEST ON ts PARTITION BY exchange))
    UNION ALL
    (SELECT CAST($nbbo_times_7 AS TIMESTAMP_NS) AS t, max(b1price) AS nbb, min(a1price) AS nbo FROM (
        SELECT ts, exchange, b1price, a1price FROM book
        WHERE sym = $sym AND ts >= $multi_start AND ts <= $nbbo_times_7
        LATEST ON ts PARTITION BY exchange))
    UNION ALL
    (SELECT CAST($nbbo_times_8 AS TIMESTAMP_NS) AS t, max(b1price) AS nbb, min(a1price) AS nbo FROM (
        SELECT ts, exchange, b1price, a1price FROM book
        WHERE sym = $sym AND ts >= $multi_start AND ts <= $nbbo_times_8
        LATEST ON ts PARTITION BY exchange))
    UNION ALL
    (SELECT CAST($nbbo_times_9 AS TIMESTAMP_NS) AS t, max(b1price) AS nbb, min(a1price) AS nbo FROM (
        SELECT ts, exchange, b1price, a1price FROM book
        WHERE sym = $sym AND ts >= $multi_start AND ts <= $nbbo_times_9
        LATEST ON ts PARTITION BY exchange))
) ORDER BY t;
