/ M-VOLCURV: per sym of B, 5-minute buckets of the session over the 20 days: whole minutes since
/ the session's open (p`session_open_minute, minutes of the UTC day; ts.minute is the trade's time
/ of day) floored to a multiple of 5, summed over the days and divided by their number.
`sym`bucket xasc update sym:value sym from 0!select avg_volume:(sum amount)%p`m_day_count by sym, bucket:5*((`long$ts.minute)-p`session_open_minute) div 5 from trades where date within p`m, sym in p`b_syms
