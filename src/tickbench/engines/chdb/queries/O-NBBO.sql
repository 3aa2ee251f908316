-- Ten NBBO probes, each a bounded lookup per venue: the rows of the minute before t, located
-- per venue by the primary key (sym, exchange, ts) (a granule or two a venue whatever the day's
-- length), give each venue's latest snapshot when every venue of S on X has a row in that
-- minute; a probe that misses a venue reads the day so far instead. A scalar subquery decides,
-- and ClickHouse folds its value into the index condition before reading, as in O-T. The
-- venues of S on X are counted once (the day's exchange column: LowCardinality, sorted by the
-- key). The probes are unrolled (PROBES = 10). The ASOF JOIN it replaced hashed S's whole day.
WITH {nbbo_times:Array(DateTime64(6, 'UTC'))} AS probes,
     {sym:String} AS s,
     {multi_start:DateTime64(6, 'UTC')} AS x0,
     {multi_end:DateTime64(6, 'UTC')} AS x1,
     (SELECT uniqExact(exchange) FROM book WHERE sym = s AND ts >= x0 AND ts < x1) AS venues
SELECT t, max(b) AS nbb, min(a) AS nbo FROM (
    (SELECT probes[1] AS t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a FROM book
     WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[1]
       AND ts > (SELECT if(uniqExact(exchange) = venues, probes[1] - INTERVAL 1 MINUTE, x0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[1]
                   AND ts > probes[1] - INTERVAL 1 MINUTE)
     GROUP BY exchange)
    UNION ALL
    (SELECT probes[2] AS t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a FROM book
     WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[2]
       AND ts > (SELECT if(uniqExact(exchange) = venues, probes[2] - INTERVAL 1 MINUTE, x0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[2]
                   AND ts > probes[2] - INTERVAL 1 MINUTE)
     GROUP BY exchange)
    UNION ALL
    (SELECT probes[3] AS t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a FROM book
     WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[3]
       AND ts > (SELECT if(uniqExact(exchange) = venues, probes[3] - INTERVAL 1 MINUTE, x0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[3]
                   AND ts > probes[3] - INTERVAL 1 MINUTE)
     GROUP BY exchange)
    UNION ALL
    (SELECT probes[4] AS t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a FROM book
     WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[4]
       AND ts > (SELECT if(uniqExact(exchange) = venues, probes[4] - INTERVAL 1 MINUTE, x0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[4]
                   AND ts > probes[4] - INTERVAL 1 MINUTE)
     GROUP BY exchange)
    UNION ALL
    (SELECT probes[5] AS t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a FROM book
     WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[5]
       AND ts > (SELECT if(uniqExact(exchange) = venues, probes[5] - INTERVAL 1 MINUTE, x0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[5]
                   AND ts > probes[5] - INTERVAL 1 MINUTE)
     GROUP BY exchange)
    UNION ALL
    (SELECT probes[6] AS t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a FROM book
     WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[6]
       AND ts > (SELECT if(uniqExact(exchange) = venues, probes[6] - INTERVAL 1 MINUTE, x0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[6]
                   AND ts > probes[6] - INTERVAL 1 MINUTE)
     GROUP BY exchange)
    UNION ALL
    (SELECT probes[7] AS t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a FROM book
     WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[7]
       AND ts > (SELECT if(uniqExact(exchange) = venues, probes[7] - INTERVAL 1 MINUTE, x0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[7]
                   AND ts > probes[7] - INTERVAL 1 MINUTE)
     GROUP BY exchange)
    UNION ALL
    (SELECT probes[8] AS t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a FROM book
     WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[8]
       AND ts > (SELECT if(uniqExact(exchange) = venues, probes[8] - INTERVAL 1 MINUTE, x0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[8]
                   AND ts > probes[8] - INTERVAL 1 MINUTE)
     GROUP BY exchange)
    UNION ALL
    (SELECT probes[9] AS t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a FROM book
     WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[9]
       AND ts > (SELECT if(uniqExact(exchange) = venues, probes[9] - INTERVAL 1 MINUTE, x0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[9]
                   AND ts > probes[9] - INTERVAL 1 MINUTE)
     GROUP BY exchange)
    UNION ALL
    (SELECT probes[10] AS t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a FROM book
     WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[10]
       AND ts > (SELECT if(uniqExact(exchange) = venues, probes[10] - INTERVAL 1 MINUTE, x0 - INTERVAL 1 MICROSECOND)
                 FROM book WHERE sym = s AND ts >= x0 AND ts < x1 AND ts <= probes[10]
                   AND ts > probes[10] - INTERVAL 1 MINUTE)
     GROUP BY exchange)
)
GROUP BY t
ORDER BY t
