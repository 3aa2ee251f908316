/ O-V1: per-minute average top-level depth of S over W.
0!select bid_depth:avg b1size, ask_depth:avg a1size by bucket:0D00:01 xbar ts from book where date within p`week, sym=p`sym
