-- Ten point lookups, one per probe time: each reads S's rows in a bounded lookback window before
-- its probe, located by the primary key (sym, exchange, ts), so a probe reads a granule or two
-- whatever the history's length. The window is the last minute, else the last hour, else the
-- month so far: a scalar subquery picks the smallest window that holds a snapshot, and
-- ClickHouse folds its value into the index condition before reading (EXPLAIN indexes = 1).
-- The probes are unrolled (PROBES = 10): a correlated form would be planned as a join.
WITH {ot_times:Array(DateTime64(6, 'UTC'))} AS probes,
     {sym:String} AS s,
     {month_start:DateTime64(6, 'UTC')} AS m0,
     {month_end:DateTime64(6, 'UTC')} AS m1
SELECT t, ts, b1price, b1size, a1price, a1size FROM (
    (SELECT probes[1] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[1]
       AND ts > (SELECT multiIf(countIf(ts > probes[1] - INTERVAL 1 MINUTE) > 0, probes[1] - INTERVAL 1 MINUTE,
                                count() > 0, probes[1] - INTERVAL 1 HOUR, m0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[1]
                   AND ts > probes[1] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT probes[2] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[2]
       AND ts > (SELECT multiIf(countIf(ts > probes[2] - INTERVAL 1 MINUTE) > 0, probes[2] - INTERVAL 1 MINUTE,
                                count() > 0, probes[2] - INTERVAL 1 HOUR, m0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[2]
                   AND ts > probes[2] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT probes[3] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[3]
       AND ts > (SELECT multiIf(countIf(ts > probes[3] - INTERVAL 1 MINUTE) > 0, probes[3] - INTERVAL 1 MINUTE,
                                count() > 0, probes[3] - INTERVAL 1 HOUR, m0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[3]
                   AND ts > probes[3] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT probes[4] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[4]
       AND ts > (SELECT multiIf(countIf(ts > probes[4] - INTERVAL 1 MINUTE) > 0, probes[4] - INTERVAL 1 MINUTE,
                                count() > 0, probes[4] - INTERVAL 1 HOUR, m0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[4]
                   AND ts > probes[4] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT probes[5] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[5]
       AND ts > (SELECT multiIf(countIf(ts > probes[5] - INTERVAL 1 MINUTE) > 0, probes[5] - INTERVAL 1 MINUTE,
                                count() > 0, probes[5] - INTERVAL 1 HOUR, m0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[5]
                   AND ts > probes[5] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT probes[6] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[6]
       AND ts > (SELECT multiIf(countIf(ts > probes[6] - INTERVAL 1 MINUTE) > 0, probes[6] - INTERVAL 1 MINUTE,
                                count() > 0, probes[6] - INTERVAL 1 HOUR, m0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[6]
                   AND ts > probes[6] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT probes[7] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[7]
       AND ts > (SELECT multiIf(countIf(ts > probes[7] - INTERVAL 1 MINUTE) > 0, probes[7] - INTERVAL 1 MINUTE,
                                count() > 0, probes[7] - INTERVAL 1 HOUR, m0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[7]
                   AND ts > probes[7] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT probes[8] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[8]
       AND ts > (SELECT multiIf(countIf(ts > probes[8] - INTERVAL 1 MINUTE) > 0, probes[8] - INTERVAL 1 MINUTE,
                                count() > 0, probes[8] - INTERVAL 1 HOUR, m0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[8]
                   AND ts > probes[8] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT probes[9] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[9]
       AND ts > (SELECT multiIf(countIf(ts > probes[9] - INTERVAL 1 MINUTE) > 0, probes[9] - INTERVAL 1 MINUTE,
                                count() > 0, probes[9] - INTERVAL 1 HOUR, m0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[9]
                   AND ts > probes[9] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT probes[10] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[10]
       AND ts > (SELECT multiIf(countIf(ts > probes[10] - INTERVAL 1 MINUTE) > 0, probes[10] - INTERVAL 1 MINUTE,
                                count() > 0, probes[10] - INTERVAL 1 HOUR, m0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= m0 AND ts < m1 AND ts <= probes[10]
                   AND ts > probes[10] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
)
ORDER BY t
