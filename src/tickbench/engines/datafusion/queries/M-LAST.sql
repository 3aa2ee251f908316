-- The latest quote per (sym, exchange) over M, by (ts, seq) (SPEC §2.3). Why this shape: it is
-- on the last day the pair quotes in M, so the month's sym and exchange (dictionary pages, no ts)
-- give each pair's last day, and a join on (day, sym, exchange) reads that day's file only: its
-- collected build side prunes the other days' files by statistics (MARKET_SETTINGS, market.py).
-- M's bounds are whole UTC days and `day` is each quote's UTC date, so the day range is M's.
WITH pairs AS (
  SELECT sym, exchange, max(day) AS day FROM quotes
  WHERE day >= CAST(CAST($m_start AS DATE) AS VARCHAR) AND day < CAST(CAST($m_end AS DATE) AS VARCHAR)
  GROUP BY sym, exchange)
SELECT q.sym, q.exchange, max(q.ts) AS ts,
       last_value(q.bid ORDER BY q.ts, q.seq) AS bid, last_value(q.bsize ORDER BY q.ts, q.seq) AS bsize,
       last_value(q.ask ORDER BY q.ts, q.seq) AS ask, last_value(q.asize ORDER BY q.ts, q.seq) AS asize
FROM pairs p JOIN quotes q ON q.day = p.day AND q.sym = p.sym AND q.exchange = p.exchange
WHERE q.ts >= $m_start AND q.ts < $m_end
GROUP BY q.sym, q.exchange
ORDER BY q.sym, q.exchange;
