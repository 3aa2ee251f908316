-- The query store's layout: both tables partitioned by range of ts, one partition per day (the
-- load creates the partitions of the days it loads and COPYs each day straight into its own).
-- A query's literal time range keeps only its days' partitions at plan time; the probes of O-T
-- and O-NBBO (ts <= t, t from the outer rows) drop the later ones at run time. schema.sql's
-- plain tables give the columns and are dropped.
ALTER TABLE trades RENAME TO trades_columns;
ALTER TABLE book RENAME TO book_columns;
CREATE TABLE trades (LIKE trades_columns) PARTITION BY RANGE (ts);
CREATE TABLE book (LIKE book_columns) PARTITION BY RANGE (ts);
DROP TABLE trades_columns, book_columns;
