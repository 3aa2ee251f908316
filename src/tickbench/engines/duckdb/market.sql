-- tickbench market schema for DuckDB (SPEC §1.3). Each day is inserted ordered by
-- (sym, ts, exchange, seq|trade_id), one day after another: the row groups are day-major and
-- sym-ordered within the day, so each one's min/max (zone map) on ts and sym lets a scan skip
-- the days and the instruments a query does not read. Names stay VARCHAR (an ENUM would order
-- by its declaration, not by bytes as SPEC §2.3's ties compare them).
CREATE TABLE instruments (
    sym VARCHAR NOT NULL PRIMARY KEY,
    rank INTEGER NOT NULL,
    tick DOUBLE NOT NULL,
    lot DOUBLE NOT NULL,
    "primary" VARCHAR NOT NULL,
    venues INTEGER NOT NULL
);
CREATE TABLE quotes (
    ts TIMESTAMP_NS NOT NULL,
    exchange VARCHAR NOT NULL,
    sym VARCHAR NOT NULL,
    bid DOUBLE NOT NULL,
    ask DOUBLE NOT NULL,
    bsize DOUBLE NOT NULL,
    asize DOUBLE NOT NULL,
    seq BIGINT NOT NULL
);
CREATE TABLE trades (
    ts TIMESTAMP_NS NOT NULL,
    exchange VARCHAR NOT NULL,
    sym VARCHAR NOT NULL,
    side VARCHAR NOT NULL,
    price DOUBLE NOT NULL,
    amount DOUBLE NOT NULL,
    trade_id BIGINT NOT NULL
);
