-- The right side stops at the last probe, so the ASOF hash table holds no later snapshots.
SELECT p.t AS t, b.ts AS ts, b.b1price AS b1price, b.b1size AS b1size, b.a1price AS a1price, b.a1size AS a1size
FROM (SELECT {sym:String} AS sym, arrayJoin({ot_times:Array(DateTime64(6, 'UTC'))}) AS t) AS p
ASOF JOIN (
    SELECT sym, ts, b1price, b1size, a1price, a1size
    FROM book
    WHERE sym = {sym:String} AND ts >= {month_start:DateTime64(6, 'UTC')} AND ts < {month_end:DateTime64(6, 'UTC')}
      AND ts <= arrayMax({ot_times:Array(DateTime64(6, 'UTC'))})
) AS b ON p.sym = b.sym AND p.t >= b.ts
ORDER BY t
