/ O-B2: the highest best bid per sym over M.
r:0!select max_bid:max b1price by sym from book where date within p`month;
`sym xasc update sym:`$string sym from r
