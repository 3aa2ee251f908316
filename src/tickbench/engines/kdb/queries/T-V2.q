/ T-V2: volume per (sym, side, day) over M; the day is the date partition, as a timestamp.
r:0!select volume:sum amount by sym, side, day:`timestamp$date from trades where date within p`month;
`sym`side`day xasc update sym:`$string sym, side:`$string side from r
