/ C-VT: hourly volatility (sample standard deviation) of 5-minute trade-price log returns of S on D.
/ Trades are stored in (ts, trade_id) order, so last price is the close SPEC asks for on tied ts.
c:select close:last price by bucket:0D00:05 xbar ts from trades where date within p`day, sym=p`sym;
r:1_select bucket, ret:deltas log close from 0!c;
v:0!select vol:sdev ret, n:count i by hour:0D01:00 xbar bucket from r;
select hour, vol from v where n>1
