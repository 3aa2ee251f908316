/ M-STATS: trades are in (ts, exchange, trade_id) order within a sym, so first/last price are the
/ open and the close; sdev is the sample deviation, null for a single trade (SPEC §2.3).
sdev1:{$[1<count x;sdev x;0n]}
`sym xasc update sym:value sym from 0!select n:count i, volume:sum amount, vwap:amount wavg price, open:first price, high:max price, low:min price, close:last price, sd:sdev1 price by sym from trades where date=p`d
