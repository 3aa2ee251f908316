/ C-VO1: hourly volatility (sample standard deviation) of 5-minute mid-quote log returns of S on D.
c:select close:last (a1price+b1price)%2 by bucket:0D00:05 xbar ts from book where date within p`day, sym=p`sym;
r:1_select bucket, ret:deltas log close from 0!c;
v:0!select vol:sdev ret, n:count i by hour:0D01:00 xbar bucket from r;
select hour, vol from v where n>1
