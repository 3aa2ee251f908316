-- Built after the load, on the partitioned tables (so on every day's partition: each has its own
-- small indexes, built in one pass over that day). Rows are stored in (sym, exchange, ts) order
-- within a day, so:
-- * btree on book (sym, ts) INCLUDE (b1price, b1size, a1price, a1size): the top of the book
--   beside the key, about a tenth of the heap's bytes (a book row is ~730 bytes). Every query
--   that reads only the top of the book and one symbol (O-T, O-V1, C-R, C-VO1, C-VO2), or every
--   symbol (O-B1, O-B2), is an index-only scan of it (COPY FREEZE and VACUUM set the visibility
--   map); O-T's lookups are one backward probe each, any venue.
-- * btree on book (sym, exchange, ts): O-NBBO's latest snapshot at or before t per venue (a
--   backward probe), and the venues themselves by a skip scan (one descent per venue): on the
--   multi-exchange day the venues interleave in time, which the (sym, ts) order cannot skip.
-- * BRIN on (sym, ts), 32 pages per range: the queries that read the heap (O-S, O-V2; T-VWAP,
--   C-VT on trades) read only S's pages of their partitions; the index is a few pages.
CREATE INDEX trades_sym_ts_brin ON trades USING brin (sym, ts) WITH (pages_per_range = 32);
CREATE INDEX book_sym_ts_brin ON book USING brin (sym, ts) WITH (pages_per_range = 32);
CREATE INDEX book_sym_ts_top ON book (sym, ts) INCLUDE (b1price, b1size, a1price, a1size);
CREATE INDEX book_sym_exchange_ts ON book (sym, exchange, ts);
-- Extended statistics on the bucket expressions the queries group by: without them the planner
-- guesses 200 groups per expression and picks a sort-based plan (ENGINES.md: 15-20x slower
-- per-minute VWAP). On a partitioned table they describe the whole table (the grouping above
-- the partitions is what they estimate); ANALYZE fills them in. The expressions must match the
-- queries' text.
CREATE STATISTICS trades_buckets (ndistinct) ON sym, side,
    date_bin('1 minute', ts, TIMESTAMPTZ 'epoch'),
    date_bin('5 minutes', ts, TIMESTAMPTZ 'epoch'),
    date_bin('1 day', ts, TIMESTAMPTZ 'epoch')
FROM trades;
CREATE STATISTICS book_buckets (ndistinct) ON sym,
    date_bin('1 minute', ts, TIMESTAMPTZ 'epoch'),
    date_bin('5 minutes', ts, TIMESTAMPTZ 'epoch'),
    date_bin('1 hour', ts, TIMESTAMPTZ 'epoch')
FROM book;
