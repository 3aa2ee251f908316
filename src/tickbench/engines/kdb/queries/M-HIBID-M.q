/ M-HIBID-M: highest bid per sym of B over the 20 days.
`sym xasc update sym:value sym from 0!select max_bid:max bid by sym from quotes where date within p`m, sym in p`b_syms
