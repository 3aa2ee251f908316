-- Built after the load, on the partitioned tables (so each day's partition gets its own, in one
-- pass over that day). Rows are stored as the dataset orders them: by sym, then time, so a
-- basket's rows of a day are a few contiguous heap ranges.
-- * quotes (sym, exchange, ts, seq) INCLUDE (bid, ask): the latest quote of a venue at or before t
--   (M-SNAP, M-THEOPL, M-ASOF) is one backward probe (ORDER BY ts DESC, seq DESC LIMIT 1: the
--   greatest (ts, seq)), index-only (COPY FREEZE and VACUUM set the visibility map), as is
--   M-HIBID's max(bid); an instrument's venues and M-LAST's (sym, exchange) pairs come from a
--   skip scan of it (one descent each); the other basket queries read their instruments' heap
--   ranges through it. Sizes are left out: only M-LAST and M-VWAB read them, and they would
--   make the index nearly the heap's size.
-- * trades (sym, ts, exchange, trade_id) INCLUDE (price, amount): the trade order of SPEC §2.3
--   after sym, so M-SNAP's last trade at or before t is one backward probe, and M-STATS-UI's
--   windows and M-OHLCV's basket are index-only ranges.
CREATE INDEX quotes_sym_exchange_ts_seq ON quotes (sym, exchange, ts, seq) INCLUDE (bid, ask);
CREATE INDEX trades_sym_ts_exchange_id ON trades (sym, ts, exchange, trade_id) INCLUDE (price, amount);
