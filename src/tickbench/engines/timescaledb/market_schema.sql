-- The market dataset's tables (SPEC §1.3) on TimescaleDB: PostgreSQL's columns (postgres/
-- market_schema.sql: timestamptz in UTC, text compared as bytes by the C collation, double
-- precision), with quotes and trades as hypertables of one chunk a day on ts (a query's literal
-- day range excludes every other chunk at plan time) and the columnstore enabled; the load
-- compresses every chunk.
-- * quotes: segmentby (sym, exchange), orderby (ts DESC, seq DESC). Every lookup of the suite is
--   per venue (M-SNAP's, M-ASOF's and M-THEOPL's latest quote, M-LAST's pairs): a batch holds one
--   instrument on one venue, so a probe reads that venue's batches alone, found by the compressed
--   chunk's index on the segment columns (and the venues of an instrument come from that index by
--   SkipScan, nothing decompressed); newest first, so "the greatest (ts, seq) at or before t"
--   stops at the first qualifying row. A basket's queries read only its instruments' batches.
-- * trades: segmentby sym, orderby (ts DESC, exchange DESC, trade_id DESC): the trade order of
--   SPEC §2.3, newest first (M-SNAP's last trade at or before t is the first row ≤ t); its
--   lookups are per instrument, whatever the venue, and a tail instrument's day has a few dozen
--   trades, which a segment per venue would split into batches too small to compress.
-- create_hypertable() rather than CREATE TABLE ... WITH (tsdb.hypertable): the latter adds a
-- columnstore policy whose background job would compress chunks at a moment of its choosing.
-- No btree index: every chunk is compressed after the load and indexes its batches itself.
CREATE TABLE instruments (
    sym text PRIMARY KEY,
    rank integer NOT NULL,
    tick double precision NOT NULL,
    lot double precision NOT NULL,
    "primary" text NOT NULL,
    venues integer NOT NULL
);
CREATE TABLE quotes (
    ts timestamptz NOT NULL,
    exchange text NOT NULL,
    sym text NOT NULL,
    bid double precision NOT NULL,
    ask double precision NOT NULL,
    bsize double precision NOT NULL,
    asize double precision NOT NULL,
    seq bigint NOT NULL
);
CREATE TABLE trades (
    ts timestamptz NOT NULL,
    exchange text NOT NULL,
    sym text NOT NULL,
    side text NOT NULL,
    price double precision NOT NULL,
    amount double precision NOT NULL,
    trade_id bigint NOT NULL
);
SELECT create_hypertable('quotes', by_range('ts', INTERVAL '1 day'), create_default_indexes => false);
SELECT create_hypertable('trades', by_range('ts', INTERVAL '1 day'), create_default_indexes => false);
ALTER TABLE quotes SET (timescaledb.enable_columnstore = true,
                        timescaledb.segmentby = 'sym, exchange',
                        timescaledb.orderby = 'ts DESC, seq DESC');
ALTER TABLE trades SET (timescaledb.enable_columnstore = true,
                        timescaledb.segmentby = 'sym',
                        timescaledb.orderby = 'ts DESC, exchange DESC, trade_id DESC');
