-- Ten point lookups, one per probe time: each reads S's rows in a bounded lookback window before
-- its probe, so a probe touches a row group or two whatever the history's length (zone maps on
-- the (sym, exchange, ts) order). The window is the last minute, else the last hour, else the
-- month so far: a scalar subquery picks the smallest window that holds a snapshot, and DuckDB
-- pushes its value into the scan as a dynamic filter; the Top-N then reads only ts and fetches
-- the other columns of the one row it keeps (late materialization).
-- The probes are unrolled (PROBES = 10): a correlated form is planned as a join over the month.
SELECT t, ts, b1price, b1size, a1price, a1size FROM (
    (SELECT $ot_times[1] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts < $month_end AND ts <= $ot_times[1]
       AND ts > (SELECT CASE WHEN count(*) FILTER (ts > $ot_times[1] - INTERVAL 1 MINUTE) > 0
                                  THEN $ot_times[1] - INTERVAL 1 MINUTE
                             WHEN count(*) > 0 THEN $ot_times[1] - INTERVAL 1 HOUR
                             ELSE $month_start - INTERVAL 1 MICROSECOND END
                 FROM book WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
                   AND ts <= $ot_times[1] AND ts > $ot_times[1] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT $ot_times[2] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts < $month_end AND ts <= $ot_times[2]
       AND ts > (SELECT CASE WHEN count(*) FILTER (ts > $ot_times[2] - INTERVAL 1 MINUTE) > 0
                                  THEN $ot_times[2] - INTERVAL 1 MINUTE
                             WHEN count(*) > 0 THEN $ot_times[2] - INTERVAL 1 HOUR
                             ELSE $month_start - INTERVAL 1 MICROSECOND END
                 FROM book WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
                   AND ts <= $ot_times[2] AND ts > $ot_times[2] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT $ot_times[3] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts < $month_end AND ts <= $ot_times[3]
       AND ts > (SELECT CASE WHEN count(*) FILTER (ts > $ot_times[3] - INTERVAL 1 MINUTE) > 0
                                  THEN $ot_times[3] - INTERVAL 1 MINUTE
                             WHEN count(*) > 0 THEN $ot_times[3] - INTERVAL 1 HOUR
                             ELSE $month_start - INTERVAL 1 MICROSECOND END
                 FROM book WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
                   AND ts <= $ot_times[3] AND ts > $ot_times[3] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT $ot_times[4] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts < $month_end AND ts <= $ot_times[4]
       AND ts > (SELECT CASE WHEN count(*) FILTER (ts > $ot_times[4] - INTERVAL 1 MINUTE) > 0
                                  THEN $ot_times[4] - INTERVAL 1 MINUTE
                             WHEN count(*) > 0 THEN $ot_times[4] - INTERVAL 1 HOUR
                             ELSE $month_start - INTERVAL 1 MICROSECOND END
                 FROM book WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
                   AND ts <= $ot_times[4] AND ts > $ot_times[4] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT $ot_times[5] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts < $month_end AND ts <= $ot_times[5]
       AND ts > (SELECT CASE WHEN count(*) FILTER (ts > $ot_times[5] - INTERVAL 1 MINUTE) > 0
                                  THEN $ot_times[5] - INTERVAL 1 MINUTE
                             WHEN count(*) > 0 THEN $ot_times[5] - INTERVAL 1 HOUR
                             ELSE $month_start - INTERVAL 1 MICROSECOND END
                 FROM book WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
                   AND ts <= $ot_times[5] AND ts > $ot_times[5] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT $ot_times[6] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts < $month_end AND ts <= $ot_times[6]
       AND ts > (SELECT CASE WHEN count(*) FILTER (ts > $ot_times[6] - INTERVAL 1 MINUTE) > 0
                                  THEN $ot_times[6] - INTERVAL 1 MINUTE
                             WHEN count(*) > 0 THEN $ot_times[6] - INTERVAL 1 HOUR
                             ELSE $month_start - INTERVAL 1 MICROSECOND END
                 FROM book WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
                   AND ts <= $ot_times[6] AND ts > $ot_times[6] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT $ot_times[7] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts < $month_end AND ts <= $ot_times[7]
       AND ts > (SELECT CASE WHEN count(*) FILTER (ts > $ot_times[7] - INTERVAL 1 MINUTE) > 0
                                  THEN $ot_times[7] - INTERVAL 1 MINUTE
                             WHEN count(*) > 0 THEN $ot_times[7] - INTERVAL 1 HOUR
                             ELSE $month_start - INTERVAL 1 MICROSECOND END
                 FROM book WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
                   AND ts <= $ot_times[7] AND ts > $ot_times[7] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT $ot_times[8] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts < $month_end AND ts <= $ot_times[8]
       AND ts > (SELECT CASE WHEN count(*) FILTER (ts > $ot_times[8] - INTERVAL 1 MINUTE) > 0
                                  THEN $ot_times[8] - INTERVAL 1 MINUTE
                             WHEN count(*) > 0 THEN $ot_times[8] - INTERVAL 1 HOUR
                             ELSE $month_start - INTERVAL 1 MICROSECOND END
                 FROM book WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
                   AND ts <= $ot_times[8] AND ts > $ot_times[8] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT $ot_times[9] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts < $month_end AND ts <= $ot_times[9]
       AND ts > (SELECT CASE WHEN count(*) FILTER (ts > $ot_times[9] - INTERVAL 1 MINUTE) > 0
                                  THEN $ot_times[9] - INTERVAL 1 MINUTE
                             WHEN count(*) > 0 THEN $ot_times[9] - INTERVAL 1 HOUR
                             ELSE $month_start - INTERVAL 1 MICROSECOND END
                 FROM book WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
                   AND ts <= $ot_times[9] AND ts > $ot_times[9] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
    UNION ALL
    (SELECT $ot_times[10] AS t, ts, b1price, b1size, a1price, a1size FROM book
     WHERE sym = $sym AND ts >= $month_start AND ts < $month_end AND ts <= $ot_times[10]
       AND ts > (SELECT CASE WHEN count(*) FILTER (ts > $ot_times[10] - INTERVAL 1 MINUTE) > 0
                                  THEN $ot_times[10] - INTERVAL 1 MINUTE
                             WHEN count(*) > 0 THEN $ot_times[10] - INTERVAL 1 HOUR
                             ELSE $month_start - INTERVAL 1 MICROSECOND END
                 FROM book WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
                   AND ts <= $ot_times[10] AND ts > $ot_times[10] - INTERVAL 1 HOUR)
     ORDER BY ts DESC LIMIT 1)
)
ORDER BY t;
