// Flux, not InfluxQL: the consolidated quote after each quote is the max/min over every
// venue's latest quote so far, state carried from point to point across series, which
// InfluxQL cannot do (fill(previous) fills only fixed GROUP BY time() intervals). Flux can:
// number the steps, pivot them into a column per venue and fill each venue's quote forward.
// D's quotes of B (bid, ask and seq as columns of one row per quote), per sym in (ts, exchange,
// seq) order, numbered 1, 2, … (several quotes at one ts are steps of their own). Each step is
// pivoted into one row with a bid and an ask column per venue (b0, a0, b1, a1, …: the venue's
// place in the bound list venues, @index; the step's own venue's columns set, the others
// none), and per sym, in step order, every venue's columns are filled forward (@fill), so a
// step's row holds each venue's latest quote so far (none before its first). nbb is the
// greatest bid and nbo the least ask of the row (@max, @min: a venue without a quote yet left
// out; if-expressions, as a call per column, math.mMax, costs Flux more per row), and a step
// is a change where either differs from the step before (difference() is not 0; the first
// step, with no step before it, always is).
steps =
    from(bucket: db)
        |> range(start: d_start, stop: d_end)
        |> filter(
            fn: (r) =>
                r._measurement == "quotes" and (r._field == "bid" or r._field == "ask" or r._field == "seq")
                    and @in(r.sym, b_syms),
        )
        |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
        |> group(columns: ["sym"])
        |> sort(columns: ["_time", "exchange", "seq"])
        |> map(fn: (r) => ({sym: r.sym, venue: @index(r.exchange, venues), bid: r.bid, ask: r.ask, step: 1}))
        |> cumulativeSum(columns: ["step"])

union(
    tables: [
        steps |> map(fn: (r) => ({sym: r.sym, step: r.step, side: "b" + r.venue, price: r.bid})),
        steps |> map(fn: (r) => ({sym: r.sym, step: r.step, side: "a" + r.venue, price: r.ask})),
    ],
)
    |> group(columns: ["sym"])
    |> pivot(rowKey: ["step"], columnKey: ["side"], valueColumn: "price")
    |> sort(columns: ["step"])
    |> @fill(b, venues)
    |> @fill(a, venues)
    |> map(
        fn: (r) => {
            @max(nbb = r.b, venues)
            @min(nbo = r.a, venues)

            return {sym: r.sym, step: r.step, nbb: nbb, nbo: nbo, dnbb: nbb, dnbo: nbo}
        },
    )
    |> difference(columns: ["dnbb", "dnbo"], keepFirst: true)
    |> filter(fn: (r) => not exists r.dnbb or r.dnbb != 0.0 or r.dnbo != 0.0)
    |> reduce(
        fn: (r, accumulator) =>
            ({n_changes: accumulator.n_changes + 1, total: accumulator.total + (r.nbo - r.nbb),
                n_locked: accumulator.n_locked + (if r.nbo <= r.nbb then 1 else 0),
            }),
        identity: {n_changes: 0, total: 0.0, n_locked: 0},
    )
    |> group()
    |> map(fn: (r) => ({sym: r.sym, n_changes: r.n_changes, mean_spread: r.total / float(v: r.n_changes), n_locked: r.n_locked}))
