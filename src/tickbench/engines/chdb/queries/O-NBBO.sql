-- O-NBBO in one read: the ten probes' one-minute windows are one OR'ed condition on the primary
-- key (sym, exchange, ts), so a single read selects a granule or two per (probe, venue) whatever
-- the day's length; each row is assigned to the probes whose window holds it (arrayJoin) and each
-- (probe, venue) keeps its latest row (argMax). ClickHouse pays its fixed per-read cost (index
-- analysis over every part) once instead of twenty-one times. That read is a scalar subquery, so
-- its result is a constant before the rest is planned: the (probe, venue) pairs with no row in
-- their minute (a quiet venue at a small scale) are answered by one second read, gated by that
-- constant, of those venues over the day up to the last such probe; with no such pair its range
-- is empty and it reads no part. The venues of S on X come from the schema's aggregate projection
-- `venues` (sym, day, exchange): the GROUP BY over X's whole days reads its few rows, not the
-- day's exchange column (X is whole days). The windows are unrolled (PROBES = 10).
WITH {nbbo_times:Array(DateTime64(6, 'UTC'))} AS probes,
     {sym:String} AS s,
     {multi_start:DateTime64(6, 'UTC')} AS x0,
     {multi_end:DateTime64(6, 'UTC')} AS x1,
     (SELECT groupUniqArray(toString(exchange)) FROM (
          SELECT exchange FROM book WHERE sym = s AND toDate(ts) >= toDate(x0) AND toDate(ts) < toDate(x1)
          GROUP BY exchange)) AS venues,
     (SELECT groupArray((t, e, b, a)) FROM (
          SELECT arrayJoin(arrayFilter(p -> ts <= p AND ts > p - INTERVAL 1 MINUTE, probes)) AS t,
                 toString(exchange) AS e, argMax(b1price, ts) AS b, argMax(a1price, ts) AS a
          FROM book
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
             OR (ts > probes[10] - INTERVAL 1 MINUTE AND ts <= probes[10]))
          GROUP BY t, e)) AS hits,
     arrayMap(h -> (h.1, h.2), hits) AS found,
     arrayFilter(p -> countEqual(hits.1, p) < length(venues), probes) AS missing,
     arrayDistinct(arrayFlatten(arrayMap(p -> arrayFilter(v -> NOT has(found, (p, v)), venues), missing))) AS quiet,
     if(empty(missing), x0 - INTERVAL 1 MICROSECOND, arrayMax(missing)) AS last_missing
SELECT t, max(b) AS nbb, min(a) AS nbo FROM (
    SELECT h.1 AS t, h.3 AS b, h.4 AS a FROM (SELECT arrayJoin(hits) AS h)
    UNION ALL
    SELECT arrayJoin(arrayFilter(p -> ts <= p AND NOT has(found, (p, toString(exchange))), missing)) AS t,
           argMax(b1price, ts) AS b, argMax(a1price, ts) AS a
    FROM book
    WHERE sym = s AND has(quiet, toString(exchange)) AND ts >= x0 AND ts < x1 AND ts <= last_missing
    GROUP BY t, exchange
)
GROUP BY t
ORDER BY t
