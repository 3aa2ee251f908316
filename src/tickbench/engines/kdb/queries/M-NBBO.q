/ M-NBBO: per sym of B on D, its quotes one step at a time in (ts, exchange, seq) order. Each venue's
/ latest bid (ask) after every step is its own column filled forward (fills), -0w (0w) before its
/ first quote, so max (min) over the venues skips it; a change is a step where (nbb, nbo) differs
/ from the step before (differ: the first step counts).
nb:{[e;b;a]
  vs:distinct e;
  bb:max {[e;b;v] -0w^fills ?[e=v;b;0n]}[e;b] each vs;
  oo:min {[e;a;v] 0w^fills ?[e=v;a;0n]}[e;a] each vs;
  c:differ flip (bb;oo);
  `n_changes`mean_spread`n_locked!(sum c;avg (oo-bb) where c;sum (oo<=bb) where c)}
/ exchange de-enumerated (value) so that it sorts as the symbols' text, byte by byte.
t:`sym`ts`exchange`seq xasc select sym:value sym, ts, exchange:value exchange, seq, bid, ask from quotes where date=p`d, sym in p`b_syms
x:0!select r:nb[exchange;bid;ask] by sym from t
`sym xasc (select sym from x),'exec r from x
