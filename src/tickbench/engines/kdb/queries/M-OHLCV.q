/ M-OHLCV: 5-minute bars (xbar) of B50 on D; trades in (ts, exchange, trade_id) order within a sym.
`sym`bucket xasc update sym:value sym from 0!select open:first price, high:max price, low:min price, close:last price, volume:sum amount by sym, bucket:0D00:05 xbar ts from trades where date=p`d, sym in p`b50_syms
