/ M-VOLCURV: per sym of B, 5-minute buckets of the session over the 20 days: whole minutes since
/ 14:30 of the trade's day (ts.minute is the time of day), floored to a multiple of 5, summed
/ over the days and divided by their number.
`sym`bucket xasc update sym:value sym from 0!select avg_volume:(sum amount)%p`n_days by sym, bucket:5*((`long$ts.minute)-870) div 5 from trades where date within p`m, sym in p`b_syms
