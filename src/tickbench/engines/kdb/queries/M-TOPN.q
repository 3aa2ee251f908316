/ M-TOPN: notional per sym on D; xdesc is a stable sort, so ties keep sym's ascending order;
/ sublist, unlike #, never repeats rows when fewer than 20 syms traded.
r:20 sublist `notional xdesc `sym xasc update sym:value sym from 0!select notional:sum price*amount by sym from trades where date=p`d
`rank xcols update rank:1+i from r
