/ C-VO2: 4-hourly volatility (sample standard deviation) of hourly mid-quote log returns of S over W.
c:select close:last (a1price+b1price)%2 by bucket:0D01:00 xbar ts from book where date within p`week, sym=p`sym;
r:1_select bucket, ret:deltas log close from 0!c;
v:0!select vol:sdev ret, n:count i by bucket4h:0D04:00 xbar bucket from r;
select bucket4h, vol from v where n>1
