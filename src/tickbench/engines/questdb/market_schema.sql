-- tickbench's market schema for QuestDB (SPEC §1.3). quotes and trades have the designated
-- timestamp `ts` (nanoseconds, as the data) and are partitioned by day: a day's or a week's query
-- reads only its partitions. Each day is appended in (ts, exchange, seq) / (ts, exchange,
-- trade_id) order, so rows that share a ts are stored in the SPEC's order: LATEST ON, ASOF JOIN,
-- first()/last() and the window functions, which follow the storage order, break ties as the SPEC
-- does. exchange, sym and side are SYMBOLs; sym's capacity ($sym_capacity) is sized from the
-- universe, and sym is INDEXed: a basket is a few instruments of a thousand, and the index turns
-- `sym IN (…)` and `LATEST ON … PARTITION BY sym` into lookups of those instruments' rows in the
-- day's partition instead of a scan of every instrument's. WAL tables, as the paper's: ILP over
-- HTTP (the load path) writes only to WAL tables.
CREATE TABLE instruments (
    sym SYMBOL CAPACITY $sym_capacity,
    rank INT,
    tick DOUBLE,
    lot DOUBLE,
    "primary" SYMBOL CAPACITY 64,
    venues INT
);
CREATE TABLE quotes (
    ts TIMESTAMP_NS,
    exchange SYMBOL CAPACITY 64,
    sym SYMBOL CAPACITY $sym_capacity INDEX,
    bid DOUBLE,
    ask DOUBLE,
    bsize DOUBLE,
    asize DOUBLE,
    seq LONG
) TIMESTAMP(ts) PARTITION BY DAY WAL;
CREATE TABLE trades (
    ts TIMESTAMP_NS,
    exchange SYMBOL CAPACITY 64,
    sym SYMBOL CAPACITY $sym_capacity INDEX,
    side SYMBOL CAPACITY 8,
    price DOUBLE,
    amount DOUBLE,
    trade_id LONG
) TIMESTAMP(ts) PARTITION BY DAY WAL;
