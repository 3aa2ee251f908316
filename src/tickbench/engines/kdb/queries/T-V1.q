/ T-V1: volume per (sym, side, 1-minute bucket) on D, every instrument.
/ sym and side come back enumerated against the HDB's sym file: `$string makes them symbols to sort by.
r:0!select volume:sum amount by sym, side, bucket:0D00:01 xbar ts from trades where date within p`day;
`sym`side`bucket xasc update sym:`$string sym, side:`$string side from r
