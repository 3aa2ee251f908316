/ M-SNAP: the grid of every (t, sym) of T x B, as-of joined (aj) to D's trades and quotes. aj takes
/ the last row at or before t in the partition's order: trades are in (ts, exchange, trade_id)
/ order within a sym, so that is the last trade; quotes in (ts, seq) order, so per (sym, exchange)
/ the latest quote. The grid is crossed with D's venues for the quotes; nbb/nbo are max/min of the
/ venues' latest bid/ask, null where no venue has quoted yet (max of all nulls would be -0w).
g:([] t:(p`t_times) where count[p`t_times]#count p`b_syms; sym:(count[p`t_times]*count p`b_syms)#p`b_syms)
g:update ts:t from g
tr:aj[`sym`ts;g;select sym:value sym, ts, last_price:price, last_amount:amount from trades where date=p`d, sym in p`b_syms]
qt:select sym:value sym, exchange:value exchange, ts, bid, ask from quotes where date=p`d, sym in p`b_syms
qs:aj[`sym`exchange`ts;g cross ([] exchange:distinct qt`exchange);qt]
bo:select nbb:{$[all null x;0n;max x]} bid, nbo:{$[all null x;0n;min x]} ask by t, sym from qs
`t`sym xasc select t, sym, last_price, last_amount, nbb, nbo from tr lj bo
