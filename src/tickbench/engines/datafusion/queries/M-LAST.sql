-- Why: a pair's latest quote is on its last day in M, found from sym/exchange alone; the join reads that day only.
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
