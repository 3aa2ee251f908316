/ M-HIBID-W: highest bid per sym of B over W (max is map-reduced over W's date partitions).
`sym xasc update sym:value sym from 0!select max_bid:max bid by sym from quotes where date within p`w, sym in p`b_syms
