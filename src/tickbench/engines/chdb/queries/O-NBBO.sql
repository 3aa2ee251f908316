-- Ten NBBO probes, each a bounded lookup per venue: every venue's latest snapshot at or before t
-- is looked for in the last minute, else the last hour, else the day so far, so a (probe, venue)
-- reads a granule or two whatever the day's length. The ten last minutes are one read (their OR
-- selects the granules through the (sym, exchange, ts) primary index) and ARRAY JOIN assigns
-- each row to the probes whose window holds it; the probes that miss a venue of S on X look
-- further back. Each level is a scalar subquery, run once before the next is planned, so the
-- next level's bounds are constants in its index condition (EXPLAIN indexes = 1): a level with
-- nothing to find reads no granule. The venues come from the data (S's exchanges on X).
WITH {nbbo_times:Array(DateTime64(6, 'UTC'))} AS probes,
     {sym:String} AS s,
     {multi_start:DateTime64(6, 'UTC')} AS x0,
     {multi_end:DateTime64(6, 'UTC')} AS x1,
     (SELECT uniqExact(exchange) FROM book WHERE sym = s AND ts >= x0 AND ts < x1) AS venues,
     (SELECT groupArray((t, b, a)) FROM (
        SELECT t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a
        FROM (SELECT ts, exchange, b1price, a1price FROM book
              WHERE sym = s AND ts >= x0 AND ts < x1
                AND ((ts > probes[1] - INTERVAL 1 MINUTE AND ts <= probes[1])
                  OR (ts > probes[2] - INTERVAL 1 MINUTE AND ts <= probes[2])
                  OR (ts > probes[3] - INTERVAL 1 MINUTE AND ts <= probes[3])
                  OR (ts > probes[4] - INTERVAL 1 MINUTE AND ts <= probes[4])
                  OR (ts > probes[5] - INTERVAL 1 MINUTE AND ts <= probes[5])
                  OR (ts > probes[6] - INTERVAL 1 MINUTE AND ts <= probes[6])
                  OR (ts > probes[7] - INTERVAL 1 MINUTE AND ts <= probes[7])
                  OR (ts > probes[8] - INTERVAL 1 MINUTE AND ts <= probes[8])
                  OR (ts > probes[9] - INTERVAL 1 MINUTE AND ts <= probes[9])
                  OR (ts > probes[10] - INTERVAL 1 MINUTE AND ts <= probes[10])))
        ARRAY JOIN arrayFilter(p -> ts > p - INTERVAL 1 MINUTE AND ts <= p, probes) AS t
        GROUP BY t, exchange)) AS minute,
     arrayFilter(p -> countEqual(minute.1, p) < venues, probes) AS miss1,
     (SELECT groupArray((t, b, a)) FROM (
        SELECT t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a
        FROM (SELECT ts, exchange, b1price, a1price FROM book
              WHERE sym = s AND ts >= x0 AND ts < x1
                AND ts > if(empty(miss1), x1, arrayMin(miss1) - INTERVAL 1 HOUR)
                AND ts <= if(empty(miss1), x0, arrayMax(miss1)))
        ARRAY JOIN arrayFilter(p -> ts > p - INTERVAL 1 HOUR AND ts <= p, miss1) AS t
        GROUP BY t, exchange)) AS hour,
     arrayFilter(p -> countEqual(hour.1, p) < venues, miss1) AS miss2
SELECT t, max(b) AS nbb, min(a) AS nbo
FROM (
    SELECT q.1 AS t, q.2 AS b, q.3 AS a FROM (SELECT arrayJoin(arrayConcat(minute, hour)) AS q)
    UNION ALL
    SELECT t, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a
    FROM (SELECT ts, exchange, b1price, a1price FROM book
          WHERE sym = s AND ts >= x0 AND ts < x1
            AND ts <= if(empty(miss2), x0 - INTERVAL 1 MICROSECOND, arrayMax(miss2)))
    ARRAY JOIN arrayFilter(p -> ts <= p, miss2) AS t
    GROUP BY t, exchange
)
GROUP BY t
ORDER BY t
