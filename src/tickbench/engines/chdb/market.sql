-- tickbench's market schema for ClickHouse (chDB); {db:Identifier} is the database, bound by the adapter.
-- Sorted by (sym, exchange, ts): every market query but M-STATS, M-TOPN and M-LAST reads a basket of
-- instruments over a day or a few, so the sparse primary index keeps the basket's granules, and a
-- venue's quotes lie in time order within an instrument (the latest-quote lookups, M-NBBO's steps);
-- seq / trade_id after ts make the order total (quotes sharing a ts stay in seq order). Partitioned
-- by UTC day: a day query touches one partition and the 20 days' parts are measured apart (M-SE).
-- Every column is read by some query, so LZ4 throughout (ClickHouse's fastest to decode), after
-- Delta on the sorted ts, seq and trade_id (README, Market tables).
CREATE TABLE {db:Identifier}.instruments (
    sym LowCardinality(String),
    rank Int32,
    tick Float64,
    lot Float64,
    `primary` LowCardinality(String),
    venues Int32
)
ENGINE = MergeTree
ORDER BY sym;
CREATE TABLE {db:Identifier}.quotes (
    ts DateTime64(9, 'UTC') CODEC(Delta, LZ4),
    exchange LowCardinality(String),
    sym LowCardinality(String),
    bid Float64 CODEC(LZ4),
    ask Float64 CODEC(LZ4),
    bsize Float64 CODEC(LZ4),
    asize Float64 CODEC(LZ4),
    seq Int64 CODEC(Delta, LZ4),
    -- Which (instrument, venue) quoted on which day, a few thousand rows per part, built with
    -- each part: M-LAST finds each pair's last day from it and reads those days alone, not the month.
    PROJECTION pair_days (SELECT sym, exchange, toDate(ts), count() GROUP BY sym, exchange, toDate(ts))
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
PRIMARY KEY (sym, exchange, ts)
ORDER BY (sym, exchange, ts, seq);
CREATE TABLE {db:Identifier}.trades (
    ts DateTime64(9, 'UTC') CODEC(Delta, LZ4),
    exchange LowCardinality(String),
    sym LowCardinality(String),
    side LowCardinality(String),
    price Float64 CODEC(LZ4),
    amount Float64 CODEC(LZ4),
    trade_id Int64 CODEC(Delta, LZ4)
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(ts)
PRIMARY KEY (sym, exchange, ts)
ORDER BY (sym, exchange, ts, trade_id);
