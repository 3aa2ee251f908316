-- The window's 12 days are consecutive trading days: [first day, day after the last) holds them alone.
SELECT sym, toDate(ts) AS day, sum(bid * bsize) / sum(bsize) AS vwab
FROM quotes
WHERE sym IN {vwab_syms:Array(String)}
  AND ts >= {vwab_start:DateTime64(6, 'UTC')} AND ts < {vwab_end:DateTime64(6, 'UTC')}
GROUP BY sym, day
ORDER BY sym, day
