/ M-THEOPL: the trades of P (looked up by exchange, sym and trade_id in D's partition), each at
/ ts + h for h in 1 10 60 300 s, as-of joined (aj) to its own venue's quotes of D: the latest quote
/ by (ts, seq), quotes being in (ts, seq) order within a sym. No row where no quote precedes.
w:([] exchange:p`p_exchanges; sym:p`p_syms; trade_id:p`p_trade_ids)
tr:select exchange:value exchange, sym:value sym, trade_id, ts, side:value side, price, amount from trades where date=p`d, sym in distinct p`p_syms
tr:tr ij `exchange`sym`trade_id xkey w
pr:raze {[t;h] update h:h, at:ts+h*0D00:00:01 from t}[tr] each 1 10 60 300
qs:select sym:value sym, exchange:value exchange, at:ts, bid, ask from quotes where date=p`d, sym in distinct p`p_syms
m:aj[`sym`exchange`at;pr;qs]
m:select exchange, sym, trade_id, h, pnl:(?[side=`buy;1f;-1f])*amount*((0.5*bid+ask)-price) from m where not null bid
`exchange`sym`trade_id`h xasc m
