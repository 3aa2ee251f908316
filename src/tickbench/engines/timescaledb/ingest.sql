-- The ingest store (tick-latency, stream and durability suites): the hypertables of hypertables.sql
-- in database "ingest", their rows kept in the rowstore (fresh ticks are not compressed while
-- they stream in; a columnstore policy would convert chunks once they are older than a day),
-- and one btree per table on (sym, ts DESC), as Timescale advises for "by instrument, newest
-- first" reads: ingest_read walks it per instrument, and ingest_latest's DISTINCT ON is a
-- SkipScan over it (one descent per instrument).
CREATE INDEX trades_sym_ts ON trades (sym, ts DESC);
CREATE INDEX book_sym_ts ON book (sym, ts DESC);
