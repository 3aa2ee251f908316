/ M-VWAB-12D: this user's block over its own 12 days, per sym and date partition.
`sym`day xasc update sym:value sym from 0!select vwab:bsize wavg bid by sym, day:date from quotes where date within p`vwab, sym in p`vwab_syms
