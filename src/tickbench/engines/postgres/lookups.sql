-- O-T's "latest snapshot of a symbol at or before t", as a function of the session (pg_temp: it
-- is dropped with the connection and leaves nothing in the database). Why not one SQL statement:
-- the planner builds a plan for every partition (PostgreSQL) or chunk (TimescaleDB) the
-- statement's time range covers, and with one a day that planning, not the lookups, is what
-- grows with history (TimescaleDB: 5 ms over a day, 26 ms over the month at SF 1; PostgreSQL:
-- 12.8 ms of planning for a month at SF 1). Here each lookup is planned with its window written
-- in as literals, so pruning keeps one or two days at plan time: first the minute before t,
-- then the hour, the day, and only then the whole range from lo (a symbol with no snapshot in
-- the day before t). Within a day, a backward index probe (PostgreSQL's (sym, ts) btree) or
-- newest-first batches (TimescaleDB) and LIMIT 1 stop at the first row.
CREATE OR REPLACE FUNCTION pg_temp.book_at(p_sym text, p_t timestamptz, p_lo timestamptz)
RETURNS TABLE (ts timestamptz, b1price double precision, b1size double precision,
               a1price double precision, a1size double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    w interval;
    lo timestamptz;
BEGIN
    FOREACH w IN ARRAY ARRAY['1 minute', '1 hour', '1 day', NULL]::interval[] LOOP
        lo := CASE WHEN w IS NULL THEN p_lo ELSE greatest(p_lo, p_t - w) END;
        RETURN QUERY EXECUTE format(
            'SELECT ts, b1price, b1size, a1price, a1size FROM book '
            'WHERE sym = %L AND ts >= %L AND ts <= %L ORDER BY ts DESC LIMIT 1', p_sym, lo, p_t);
        EXIT WHEN FOUND OR lo = p_lo;
    END LOOP;
END
$$;
