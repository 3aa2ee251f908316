-- The ingest store (tick-latency, stream and durability suites): the plain schema.sql tables in
-- database "ingest", and one btree per table on (sym, ts): every read of the ingest suites is
-- one instrument in time order (ingest_read) or the latest book row per instrument
-- (ingest_latest, a DISTINCT ON walk of the same index). Rows arrive in time order, so both
-- indexes grow at their right edge; the unsummarized tail of a BRIN index (every row since its
-- last summarize) would be scanned by every read.
CREATE INDEX trades_sym_ts ON trades (sym, ts);
CREATE INDEX book_sym_ts ON book (sym, ts);
