/ M-HIBID-D: highest bid per sym of B on D (p# on sym: only the basket's rows of D's partition).
/ Symbol columns of the HDB are enumerations; value gives their symbols, which sort as text.
`sym xasc update sym:value sym from 0!select max_bid:max bid by sym from quotes where date=p`d, sym in p`b_syms
