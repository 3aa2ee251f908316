-- The market dataset's tables (SPEC §1.3), in the database the paper's tables would use (a run
-- loads one dataset; trades has the paper's columns). Heap tables; timestamps timestamptz (µs,
-- UTC; the data are whole µs), strings text (the cluster's C collation compares them as bytes,
-- the suite's order), prices and sizes double precision. quotes and trades are partitioned by
-- range of ts, a partition per trading day (the load creates them): a query's literal day range
-- keeps only its days at plan time, so a day's lookups plan and probe one partition.
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
) PARTITION BY RANGE (ts);
CREATE TABLE trades (
    ts timestamptz NOT NULL,
    exchange text NOT NULL,
    sym text NOT NULL,
    side text NOT NULL,
    price double precision NOT NULL,
    amount double precision NOT NULL,
    trade_id bigint NOT NULL
) PARTITION BY RANGE (ts);
