-- Per probe time t, unrolled under UNION ALL as the paper's O-NBBO: the basket's grid (from
-- instruments: a row for every (t, sym)), each sym's last trade at or before t on D by `LATEST ON
-- … PARTITION BY sym` (a backward read of D's partition from t through the sym index), and each
-- (sym, venue)'s latest quote by `LATEST ON … PARTITION BY sym, exchange` over a subquery: on the
-- table itself QuestDB reads every instrument's quotes back to the day's start (it cannot use the
-- index for two keys), on the subquery only the basket's, through the index. Among rows of one ts
-- the last stored wins, which is the SPEC's tie order; LEFT JOINs leave nulls where nothing precedes t.
SELECT * FROM (
    (SELECT CAST($t_times_0 AS TIMESTAMP_NS) AS t, g.sym AS sym, l.last_price AS last_price,
            l.last_amount AS last_amount, b.nbb AS nbb, b.nbo AS nbo
     FROM (SELECT sym FROM instruments WHERE sym IN ($b_syms)) g
     LEFT JOIN (SELECT sym, price AS last_price, amount AS last_amount FROM trades
                WHERE ts >= $d_start AND ts <= $t_times_0 AND sym IN ($b_syms)
                LATEST ON ts PARTITION BY sym) l ON g.sym = l.sym
     LEFT JOIN (SELECT sym, max(bid) AS nbb, min(ask) AS nbo FROM (
                    (SELECT ts, sym, exchange, bid, ask FROM quotes
                    WHERE ts >= $d_start AND ts <= $t_times_0 AND sym IN ($b_syms))
                    LATEST ON ts PARTITION BY sym, exchange)) b ON g.sym = b.sym)
    UNION ALL
    (SELECT CAST($t_times_1 AS TIMESTAMP_NS) AS t, g.sym AS sym, l.last_price AS last_price,
            l.last_amount AS last_amount, b.nbb AS nbb, b.nbo AS nbo
     FROM (SELECT sym FROM instruments WHERE sym IN ($b_syms)) g
     LEFT JOIN (SELECT sym, price AS last_price, amount AS last_amount FROM trades
                WHERE ts >= $d_start AND ts <= $t_times_1 AND sym IN ($b_syms)
                LATEST ON ts PARTITION BY sym) l ON g.sym = l.sym
     LEFT JOIN (SELECT sym, max(bid) AS nbb, min(ask) AS nbo FROM (
                    (SELECT ts, sym, exchange, bid, ask FROM quotes
                    WHERE ts >= $d_start AND ts <= $t_times_1 AND sym IN ($b_syms))
                    LATEST ON ts PARTITION BY sym, exchange)) b ON g.sym = b.sym)
    UNION ALL
    (SELECT CAST($t_times_2 AS TIMESTAMP_NS) AS t, g.sym AS sym, l.last_price AS last_price,
            l.last_amount AS last_amount, b.nbb AS nbb, b.nbo AS nbo
     FROM (SELECT sym FROM instruments WHERE sym IN ($b_syms)) g
     LEFT JOIN (SELECT sym, price AS last_price, amount AS last_amount FROM trades
                WHERE ts >= $d_start AND ts <= $t_times_2 AND sym IN ($b_syms)
                LATEST ON ts PARTITION BY sym) l ON g.sym = l.sym
     LEFT JOIN (SELECT sym, max(bid) AS nbb, min(ask) AS nbo FROM (
                    (SELECT ts, sym, exchange, bid, ask FROM quotes
                    WHERE ts >= $d_start AND ts <= $t_times_2 AND sym IN ($b_syms))
                    LATEST ON ts PARTITION BY sym, exchange)) b ON g.sym = b.sym)
    UNION ALL
    (SELECT CAST($t_times_3 AS TIMESTAMP_NS) AS t, g.sym AS sym, l.last_price AS last_price,
            l.last_amount AS last_amount, b.nbb AS nbb, b.nbo AS nbo
     FROM (SELECT sym FROM instruments WHERE sym IN ($b_syms)) g
     LEFT JOIN (SELECT sym, price AS last_price, amount AS last_amount FROM trades
                WHERE ts >= $d_start AND ts <= $t_times_3 AND sym IN ($b_syms)
                LATEST ON ts PARTITION BY sym) l ON g.sym = l.sym
     LEFT JOIN (SELECT sym, max(bid) AS nbb, min(ask) AS nbo FROM (
                    (SELECT ts, sym, exchange, bid, ask FROM quotes
                    WHERE ts >= $d_start AND ts <= $t_times_3 AND sym IN ($b_syms))
                    LATEST ON ts PARTITION BY sym, exchange)) b ON g.sym = b.sym)
    UNION ALL
    (SELECT CAST($t_times_4 AS TIMESTAMP_NS) AS t, g.sym AS sym, l.last_price AS last_price,
            l.last_amount AS last_amount, b.nbb AS nbb, b.nbo AS nbo
     FROM (SELECT sym FROM instruments WHERE sym IN ($b_syms)) g
     LEFT JOIN (SELECT sym, price AS last_price, amount AS last_amount FROM trades
                WHERE ts >= $d_start AND ts <= $t_times_4 AND sym IN ($b_syms)
                LATEST ON ts PARTITION BY sym) l ON g.sym = l.sym
     LEFT JOIN (SELECT sym, max(bid) AS nbb, min(ask) AS nbo FROM (
                    (SELECT ts, sym, exchange, bid, ask FROM quotes
                    WHERE ts >= $d_start AND ts <= $t_times_4 AND sym IN ($b_syms))
                    LATEST ON ts PARTITION BY sym, exchange)) b ON g.sym = b.sym)
    UNION ALL
    (SELECT CAST($t_times_5 AS TIMESTAMP_NS) AS t, g.sym AS sym, l.last_price AS last_price,
            l.last_amount AS last_amount, b.nbb AS nbb, b.nbo AS nbo
     FROM (SELECT sym FROM instruments WHERE sym IN ($b_syms)) g
     LEFT JOIN (SELECT sym, price AS last_price, amount AS last_amount FROM trades
                WHERE ts >= $d_start AND ts <= $t_times_5 AND sym IN ($b_syms)
                LATEST ON ts PARTITION BY sym) l ON g.sym = l.sym
     LEFT JOIN (SELECT sym, max(bid) AS nbb, min(ask) AS nbo FROM (
                    (SELECT ts, sym, exchange, bid, ask FROM quotes
                    WHERE ts >= $d_start AND ts <= $t_times_5 AND sym IN ($b_syms))
                    LATEST ON ts PARTITION BY sym, exchange)) b ON g.sym = b.sym)
    UNION ALL
    (SELECT CAST($t_times_6 AS TIMESTAMP_NS) AS t, g.sym AS sym, l.last_price AS last_price,
            l.last_amount AS last_amount, b.nbb AS nbb, b.nbo AS nbo
     FROM (SELECT sym FROM instruments WHERE sym IN ($b_syms)) g
     LEFT JOIN (SELECT sym, price AS last_price, amount AS last_amount FROM trades
                WHERE ts >= $d_start AND ts <= $t_times_6 AND sym IN ($b_syms)
                LATEST ON ts PARTITION BY sym) l ON g.sym = l.sym
     LEFT JOIN (SELECT sym, max(bid) AS nbb, min(ask) AS nbo FROM (
                    (SELECT ts, sym, exchange, bid, ask FROM quotes
                    WHERE ts >= $d_start AND ts <= $t_times_6 AND sym IN ($b_syms))
                    LATEST ON ts PARTITION BY sym, exchange)) b ON g.sym = b.sym)
    UNION ALL
    (SELECT CAST($t_times_7 AS TIMESTAMP_NS) AS t, g.sym AS sym, l.last_price AS last_price,
            l.last_amount AS last_amount, b.nbb AS nbb, b.nbo AS nbo
     FROM (SELECT sym FROM instruments WHERE sym IN ($b_syms)) g
     LEFT JOIN (SELECT sym, price AS last_price, amount AS last_amount FROM trades
                WHERE ts >= $d_start AND ts <= $t_times_7 AND sym IN ($b_syms)
                LATEST ON ts PARTITION BY sym) l ON g.sym = l.sym
     LEFT JOIN (SELECT sym, max(bid) AS nbb, min(ask) AS nbo FROM (
                    (SELECT ts, sym, exchange, bid, ask FROM quotes
                    WHERE ts >= $d_start AND ts <= $t_times_7 AND sym IN ($b_syms))
                    LATEST ON ts PARTITION BY sym, exchange)) b ON g.sym = b.sym)
    UNION ALL
    (SELECT CAST($t_times_8 AS TIMESTAMP_NS) AS t, g.sym AS sym, l.last_price AS last_price,
            l.last_amount AS last_amount, b.nbb AS nbb, b.nbo AS nbo
     FROM (SELECT sym FROM instruments WHERE sym IN ($b_syms)) g
     LEFT JOIN (SELECT sym, price AS last_price, amount AS last_amount FROM trades
                WHERE ts >= $d_start AND ts <= $t_times_8 AND sym IN ($b_syms)
                LATEST ON ts PARTITION BY sym) l ON g.sym = l.sym
     LEFT JOIN (SELECT sym, max(bid) AS nbb, min(ask) AS nbo FROM (
                    (SELECT ts, sym, exchange, bid, ask FROM quotes
                    WHERE ts >= $d_start AND ts <= $t_times_8 AND sym IN ($b_syms))
                    LATEST ON ts PARTITION BY sym, exchange)) b ON g.sym = b.sym)
    UNION ALL
    (SELECT CAST($t_times_9 AS TIMESTAMP_NS) AS t, g.sym AS sym, l.last_price AS last_price,
            l.last_amount AS last_amount, b.nbb AS nbb, b.nbo AS nbo
     FROM (SELECT sym FROM instruments WHERE sym IN ($b_syms)) g
     LEFT JOIN (SELECT sym, price AS last_price, amount AS last_amount FROM trades
                WHERE ts >= $d_start AND ts <= $t_times_9 AND sym IN ($b_syms)
                LATEST ON ts PARTITION BY sym) l ON g.sym = l.sym
     LEFT JOIN (SELECT sym, max(bid) AS nbb, min(ask) AS nbo FROM (
                    (SELECT ts, sym, exchange, bid, ask FROM quotes
                    WHERE ts >= $d_start AND ts <= $t_times_9 AND sym IN ($b_syms))
                    LATEST ON ts PARTITION BY sym, exchange)) b ON g.sym = b.sym)
) ORDER BY t, sym;
