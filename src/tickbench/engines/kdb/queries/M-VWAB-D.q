/ M-VWAB-D: bsize wavg bid is sum(bid*bsize) % sum(bsize).
`sym xasc update sym:value sym from 0!select vwab:bsize wavg bid by sym from quotes where date=p`d, sym in p`b_syms
