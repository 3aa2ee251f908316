-- Per sym and UTC day of the user's window: SAMPLE BY 1d, its day as a DATE.
SELECT sym, CAST(ts AS DATE) AS day, vwab FROM (
    SELECT ts, sym, sum(bid * bsize) / sum(bsize) AS vwab
    FROM quotes
    WHERE ts >= $vwab_start AND ts < $vwab_end AND sym IN ($vwab_syms)
    SAMPLE BY 1d ALIGN TO CALENDAR
)
ORDER BY sym, day;
