-- tickbench's TimescaleDB layer over the plain PostgreSQL tables (postgres/schema.sql, run first):
-- the tables become hypertables
-- with one chunk per day on ts (a query's time range excludes whole chunks, at plan time for
-- constants and at run time for O-T's and O-NBBO's per-time probes), columnstore enabled.
-- Timescale's advice for tick data: segmentby the instrument and its venue (each compressed
-- batch is one (sym, exchange) series of up to 1000 rows; a query for one sym reads only its
-- batches, and a per-venue query finds its venues from the segment index without decompressing),
-- orderby ts DESC (the newest row of a batch comes first, so "latest at or before t" stops at the
-- first qualifying row; each batch's min/max ts is kept beside it and skips batches outside a
-- range). No btree index: the query data are all compressed after the load (compressed chunks
-- get their own (sym, exchange, ts-range) index), and a rowstore index would only be dead weight.
-- create_hypertable() rather than CREATE TABLE ... WITH (tsdb.hypertable): the latter adds a
-- columnstore policy whose background job would compress chunks at a moment of its choosing.
SELECT create_hypertable('trades', by_range('ts', INTERVAL '1 day'), create_default_indexes => false);
SELECT create_hypertable('book', by_range('ts', INTERVAL '1 day'), create_default_indexes => false);
ALTER TABLE trades SET (timescaledb.enable_columnstore = true,
                        timescaledb.segmentby = 'sym, exchange',
                        timescaledb.orderby = 'ts DESC, trade_id DESC');
ALTER TABLE book SET (timescaledb.enable_columnstore = true,
                      timescaledb.segmentby = 'sym, exchange',
                      timescaledb.orderby = 'ts DESC');
