/ M-LAST: the latest quote of every (sym, exchange) over the 20 days: quotes are in (ts, seq)
/ order within a sym in each date partition, so the last row of a group, taken over the dates in
/ order, is the greatest (ts, seq).
`sym`exchange xasc update sym:value sym, exchange:value exchange from 0!select last ts, last bid, last bsize, last ask, last asize by sym, exchange from quotes where date within p`m
