-- The probe times come from the `probes` table written at load (ASOF JOIN needs a timestamped left side).
SELECT p.t, b.ts, b.b1price, b.b1size, b.a1price, b.a1size
FROM (probes WHERE qid = 'O-T') p
ASOF JOIN (
    SELECT ts, b1price, b1size, a1price, a1size
    FROM book
    WHERE sym = $sym AND ts >= $month_start AND ts < $month_end
) b
ORDER BY p.t;
