/ M-ASOF: each trade of B50 on D as-of joined (aj) to its own venue's quotes: the last quote at or
/ before its ts by (ts, seq), quotes being in (ts, seq) order within a sym; trades with none are
/ left out. Syms of B50 that do not exist match no row.
t:select sym, exchange, ts, price from trades where date=p`d, sym in p`b50_syms
qt:select sym, exchange, ts, bid, ask from quotes where date=p`d, sym in p`b50_syms
r:update mid:0.5*bid+ask from aj[`sym`exchange`ts;t;qt]
`sym xasc update sym:value sym from 0!select n:count i, eff_spread:avg 2*abs[price-mid]%mid by sym from r where not null mid
