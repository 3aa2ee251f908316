-- The market snapshot of the ingest store: the latest book row per instrument. DISTINCT ON
-- (sym) ... ORDER BY sym, ts DESC runs as TimescaleDB's SkipScan over the (sym, ts DESC) index:
-- one index descent per instrument, not a read of every row.
SELECT DISTINCT ON (sym) sym, ts, b1price, a1price
FROM book
ORDER BY sym, ts DESC
