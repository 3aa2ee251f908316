/ C-R: 5-minute mid-quote log returns of S on D. The close is the mid of the bucket's last snapshot
/ (rows are in time order); deltas of log close, the first bucket dropped.
c:select close:last (a1price+b1price)%2 by bucket:0D00:05 xbar ts from book where date within p`day, sym=p`sym;
1_select bucket, ret:deltas log close from 0!c
