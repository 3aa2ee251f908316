/ O-B1: the highest best bid per sym over W.
r:0!select max_bid:max b1price by sym from book where date within p`week;
`sym xasc update sym:`$string sym from r
