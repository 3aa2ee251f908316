-- O-T in one read: the ten probes' one-minute windows are one OR'ed condition on the primary key
-- (sym, exchange, ts), so a single read selects a granule or two per probe whatever the history's
-- length; each row is assigned to the probes whose window holds it (arrayJoin) and each probe keeps
-- its latest row (argMax). ClickHouse pays its fixed per-read cost (index analysis over every part)
-- once instead of twenty times. That read is a scalar subquery, so its result is a constant before
-- the rest is planned: a probe whose minute is empty (no probe of seed 7 at SF 0.05, 0.2 or 1) is
-- answered by one second read, gated by that constant, over the rows from the latest snapshot an
-- earlier probe found (the month's start for none) to the last such probe; with no such probe its
-- range is empty and it reads no part. The windows are unrolled (PROBES = 10).
WITH {ot_times:Array(DateTime64(6, 'UTC'))} AS probes,
     {sym:String} AS s,
     {month_start:DateTime64(6, 'UTC')} AS m0,
     {month_end:DateTime64(6, 'UTC')} AS m1,
     (SELECT groupArray((t, r)) FROM (
          SELECT arrayJoin(arrayFilter(p -> ts <= p AND ts > p - INTERVAL 1 MINUTE, probes)) AS t,
                 argMax((ts, b1price, b1size, a1price, a1size), ts) AS r
          FROM book
          WHERE sym = s AND ts >= m0 AND ts < m1
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
          GROUP BY t)) AS hits,
     arrayFilter(p -> NOT has(hits.1, p), probes) AS missing,
     greatest(m0, arrayMax(arrayMap(h -> h.2.1, arrayFilter(h -> h.1 < arrayMin(missing), hits)))) AS floor_ts,
     if(empty(missing), m0 - INTERVAL 1 MICROSECOND, arrayMax(missing)) AS last_missing
SELECT t, r.1 AS ts, r.2 AS b1price, r.3 AS b1size, r.4 AS a1price, r.5 AS a1size FROM (
    SELECT h.1 AS t, h.2 AS r FROM (SELECT arrayJoin(hits) AS h)
    UNION ALL
    SELECT arrayJoin(arrayFilter(p -> ts <= p, missing)) AS t,
           argMax((ts, b1price, b1size, a1price, a1size), ts) AS r
    FROM book
    WHERE sym = s AND ts >= m0 AND ts < m1 AND ts >= floor_ts AND ts <= last_missing
    GROUP BY t
)
ORDER BY t
