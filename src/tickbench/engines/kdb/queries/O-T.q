/ O-T: top of book of S at each probe t of M: the latest snapshot with ts <= t.
/ Each probe is as-of joined (aj0, which keeps the snapshot's own ts) to its date's partition, mapped
/ whole as aj wants it (p# on sym, time order within sym); a probe before that day's first
/ snapshot of S goes on to the dates before it.
ot:{[pt]
  d:"d"$pt;
  while[d>=first p`month;
    r:aj0[`sym`ts;([] sym:enlist `sym$p`sym; ts:enlist pt; t:enlist pt);
      select sym, ts, b1price, b1size, a1price, a1size from book where date=d];
    if[not null first r`b1price; :select t, ts, b1price, b1size, a1price, a1size from r];
    d-:1];
  select t, ts, b1price, b1size, a1price, a1size from 0#r}
raze ot each p`ot_times
