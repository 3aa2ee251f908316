-- The day is the UTC day's bucket; [vwab_start, vwab_end) covers the user's 12 trading days, so
-- only their chunks are planned.
SELECT sym, time_bucket('1 day', ts)::date AS day, sum(bid * bsize) / sum(bsize) AS vwab
FROM quotes
WHERE sym = ANY(%(vwab_syms)s::text[]) AND ts >= %(vwab_start)s AND ts < %(vwab_end)s
GROUP BY sym, day
ORDER BY sym, day;
