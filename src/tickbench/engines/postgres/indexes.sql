-- Built after the load (plain tables only). Rows are stored in (sym, exchange, ts) order, so:
-- * BRIN on (sym, ts): each range of 32 pages holds one instrument over a short time span, so a
--   scan of one sym's day, week or month (or of every sym's day) reads only those pages; the
--   index is a few pages, where a btree over every row would be a third of the trades table.
-- * btree on book (sym, exchange, ts): O-T and O-NBBO look up the latest snapshot at or before
--   a time per venue (LATERAL … ORDER BY ts DESC LIMIT 1), and find the venues by skipping
--   through the index (recursive CTE), instead of scanning the multi-exchange day.
CREATE INDEX trades_sym_ts_brin ON trades USING brin (sym, ts) WITH (pages_per_range = 32);
CREATE INDEX book_sym_ts_brin ON book USING brin (sym, ts) WITH (pages_per_range = 32);
CREATE INDEX book_sym_exchange_ts ON book (sym, exchange, ts);
-- Extended statistics on the bucket expressions the queries group by: without them the planner
-- guesses 200 groups per expression and picks a sort-based plan (ENGINES.md: 15-20x slower
-- per-minute VWAP). ANALYZE fills them in. The expressions must match the queries' text.
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
