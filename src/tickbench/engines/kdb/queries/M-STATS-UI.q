/ M-STATS-UI: M-STATS once per request k, over its own basket (the syms paired with k) and window.
sdev1:{$[1<count x;sdev x;0n]}
ui:{[k]
  s:(p`ui_pair_sym) where (p`ui_pair_req)=k;
  r:update sym:value sym from 0!select n:count i, volume:sum amount, vwap:amount wavg price, open:first price, high:max price, low:min price, close:last price, sd:sdev1 price by sym from trades where date=p`d, sym in s, ts>=(p`ui_from) k, ts<(p`ui_to) k;
  `req xcols update req:k from r}
`req`sym xasc raze ui each p`ui_req
