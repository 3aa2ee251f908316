-- The day is the UTC date (the session's time zone is UTC); [vwab_start, vwab_end) covers the
-- user's 12 trading days, so only their 12 partitions are planned.
SELECT sym, (ts AT TIME ZONE 'UTC')::date AS day, sum(bid * bsize) / sum(bsize) AS vwab
FROM quotes
WHERE sym = ANY(%(vwab_syms)s::text[]) AND ts >= %(vwab_start)s AND ts < %(vwab_end)s
GROUP BY sym, day
ORDER BY sym, day;
