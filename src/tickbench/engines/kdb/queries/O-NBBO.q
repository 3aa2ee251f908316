/ O-NBBO: the NBBO of S at each probe t on X over the venues that have quoted by t.
/ One aj0 per venue on its own rows (time-ordered), then the best bid and offer per probe.
xb:select exchange, ts, b1price, a1price from book where date within p`multi, sym=p`sym;
nb:{[v] aj0[`ts;([] t:p`nbbo_times; ts:p`nbbo_times);select ts, b1price, a1price from xb where exchange=v]};
0!select nbb:max b1price, nbo:min a1price by t from raze nb each distinct xb`exchange where not null b1price
