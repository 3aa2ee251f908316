-- The market snapshot of the ingest store: the latest book row per instrument. PostgreSQL 15
-- has no skip scan, so the instruments come from a recursive walk of the (sym, ts) btree (one
-- descent per sym) and each one's latest row from one backward probe of the same index; a
-- DISTINCT ON over the table would read every row.
WITH RECURSIVE syms AS (
    SELECT min(sym) AS sym FROM book
    UNION ALL
    SELECT (SELECT min(b.sym) FROM book b WHERE b.sym > syms.sym) FROM syms WHERE syms.sym IS NOT NULL
)
SELECT last.sym, last.ts, last.b1price, last.a1price
FROM syms, LATERAL (
    SELECT sym, ts, b1price, a1price FROM book WHERE book.sym = syms.sym ORDER BY ts DESC LIMIT 1
) last
ORDER BY last.sym
