-- M-STATS per request, its ten requests unrolled under UNION ALL (each with its own window and
-- basket); first()/last() follow the storage order, which is (ts, exchange, trade_id).
SELECT * FROM (
    (SELECT $ui_req_0 AS req, sym, count() AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
            first(price) AS open, max(price) AS high, min(price) AS low, last(price) AS close,
            stddev_samp(price) AS sd
     FROM trades WHERE ts >= $ui_from_0 AND ts < $ui_to_0 AND sym IN ($ui_syms_0))
    UNION ALL
    (SELECT $ui_req_1 AS req, sym, count() AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
            first(price) AS open, max(price) AS high, min(price) AS low, last(price) AS close,
            stddev_samp(price) AS sd
     FROM trades WHERE ts >= $ui_from_1 AND ts < $ui_to_1 AND sym IN ($ui_syms_1))
    UNION ALL
    (SELECT $ui_req_2 AS req, sym, count() AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
            first(price) AS open, max(price) AS high, min(price) AS low, last(price) AS close,
            stddev_samp(price) AS sd
     FROM trades WHERE ts >= $ui_from_2 AND ts < $ui_to_2 AND sym IN ($ui_syms_2))
    UNION ALL
    (SELECT $ui_req_3 AS req, sym, count() AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
            first(price) AS open, max(price) AS high, min(price) AS low, last(price) AS close,
            stddev_samp(price) AS sd
     FROM trades WHERE ts >= $ui_from_3 AND ts < $ui_to_3 AND sym IN ($ui_syms_3))
    UNION ALL
    (SELECT $ui_req_4 AS req, sym, count() AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
            first(price) AS open, max(price) AS high, min(price) AS low, last(price) AS close,
            stddev_samp(price) AS sd
     FROM trades WHERE ts >= $ui_from_4 AND ts < $ui_to_4 AND sym IN ($ui_syms_4))
    UNION ALL
    (SELECT $ui_req_5 AS req, sym, count() AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
            first(price) AS open, max(price) AS high, min(price) AS low, last(price) AS close,
            stddev_samp(price) AS sd
     FROM trades WHERE ts >= $ui_from_5 AND ts < $ui_to_5 AND sym IN ($ui_syms_5))
    UNION ALL
    (SELECT $ui_req_6 AS req, sym, count() AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
            first(price) AS open, max(price) AS high, min(price) AS low, last(price) AS close,
            stddev_samp(price) AS sd
     FROM trades WHERE ts >= $ui_from_6 AND ts < $ui_to_6 AND sym IN ($ui_syms_6))
    UNION ALL
    (SELECT $ui_req_7 AS req, sym, count() AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
            first(price) AS open, max(price) AS high, min(price) AS low, last(price) AS close,
            stddev_samp(price) AS sd
     FROM trades WHERE ts >= $ui_from_7 AND ts < $ui_to_7 AND sym IN ($ui_syms_7))
    UNION ALL
    (SELECT $ui_req_8 AS req, sym, count() AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
            first(price) AS open, max(price) AS high, min(price) AS low, last(price) AS close,
            stddev_samp(price) AS sd
     FROM trades WHERE ts >= $ui_from_8 AND ts < $ui_to_8 AND sym IN ($ui_syms_8))
    UNION ALL
    (SELECT $ui_req_9 AS req, sym, count() AS n, sum(amount) AS volume, sum(price * amount) / sum(amount) AS vwap,
            first(price) AS open, max(price) AS high, min(price) AS low, last(price) AS close,
            stddev_samp(price) AS sd
     FROM trades WHERE ts >= $ui_from_9 AND ts < $ui_to_9 AND sym IN ($ui_syms_9))
) ORDER BY req, sym;
