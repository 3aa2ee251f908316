SELECT sym, sum(bid * bsize) / sum(bsize) AS vwab
FROM quotes
WHERE sym IN {b_syms:Array(String)}
  AND ts >= {d_start:DateTime64(6, 'UTC')} AND ts < {d_end:DateTime64(6, 'UTC')}
GROUP BY sym
ORDER BY sym
