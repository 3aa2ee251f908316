/ T-VWAP: per-minute VWAP of S on D; amount wavg price is sum(amount*price) % sum(amount).
0!select vwap:amount wavg price by bucket:0D00:01 xbar ts from trades where date within p`day, sym=p`sym
