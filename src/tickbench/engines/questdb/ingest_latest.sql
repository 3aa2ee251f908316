-- The ingest store's market snapshot: the latest book row per sym. LATEST ON reads each sym's
-- last row by the designated timestamp (scanning backwards from the newest partition), so its
-- cost does not grow with the rows written; the outer ORDER BY puts the syms in order.
SELECT sym, ts, b1price, a1price FROM ingest_book LATEST ON ts PARTITION BY sym ORDER BY sym
