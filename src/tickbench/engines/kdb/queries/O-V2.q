/ O-V2: per-hour average depth of the first 5 levels of S over M.
0!select bid_depth:avg b1size+b2size+b3size+b4size+b5size, ask_depth:avg a1size+a2size+a3size+a4size+a5size
  by bucket:0D01:00 xbar ts from book where date within p`month, sym=p`sym
