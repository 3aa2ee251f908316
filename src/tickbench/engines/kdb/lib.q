/ tickbench's q helpers for the kdb+ adapter, in the .tb namespace; the adapter evaluates this
/ file once per q session, flattened as it flattens the query files (see README.md).

/ Set when W's CSV timestamps had to be parsed as text (see .tb.csv).
.tb.tstext:0b

/ Map the HDB in directory dir (a string). .Q.lo (q 4.1t 2023.03.01 and later) leaves q's working
/ directory alone; \l, the fallback, moves it into the HDB, which the adapter's absolute paths survive.
.tb.open:{[dir] $[`lo in key `.Q;.Q.lo[hsym `$dir;0b;0b];system "l ",dir]}

/ Drop the HDB's tables (their mapped files are released: the paper's and the market's, whichever
/ the HDB holds) and its sym domain; give the memory back.
.tb.close:{delete trades, book, quotes, instruments, sym from `.; .Q.gc[]}

/ Write the in-memory table t as partition d (a "YYYY-MM-DD" string) of table tn in the HDB at dir.
/ Rows are put in time order by k first; .Q.dpft then enumerates the symbol columns against dir/sym,
/ sorts the rows by sym with a stable sort (so time order holds within each sym) and sets `p# on sym.
/ The HDB's files are compressed as they are written, as KX advises for historical partitions:
/ .z.zd (logical block 2^17 = 128 KB; algorithm 2, gzip, whose libz every Linux has; level 6) is
/ set for the write and removed after it, so W's baseline (.tb.splay) stays the plain copy.
.tb.zip:17 2 6
.tb.part:{[dir;d;tn;t;k]
  tn set k xasc t;
  .z.zd:.tb.zip; @[.Q.dpft[hsym `$dir;"D"$d;`sym];tn;{system "x .z.zd"; 'x}]; system "x .z.zd";
  tn set 0#t; count t}

/ Rows of table tn in partition d of the HDB at dir, read back from its ts column file.
.tb.rows:{[dir;d;tn] count get ` sv (hsym `$dir;`$string "D"$d;tn;`ts)}

/ Read one of the dataset's CSV files (a header row, no quoting) with column types ty and names nm.
/ Its timestamps end in "Z" (UTC), which the documentation of "P" does not cover: when "P" leaves
/ any ts null, ts is read again as text and parsed without the "Z".
.tb.csv:{[f;ty;nm]
  t:nm xcol (ty;enlist ",") 0: hsym `$f;
  if[not any null t`ts; :t];
  `.tb.tstext set 1b;
  t:nm xcol (("*",1_ty);enlist ",") 0: hsym `$f;
  update ts:"P"$-1_'ts from t}

/ W's baseline: the simplest durable copy, the splayed table dir/tn/ with its symbols enumerated.
.tb.splay:{[dir;tn;t] (` sv hsym[`$dir],tn,`) set .Q.en[hsym `$dir] t; count t}
