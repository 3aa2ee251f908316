// Flux, not InfluxQL: the consolidated quote after each quote is the max/min over every
// venue's latest quote so far, state carried from point to point across series, which
// InfluxQL cannot do (fill(previous) fills only fixed GROUP BY time() intervals). Flux can:
// number the steps, pair each with every venue and fill each venue's quote forward.
// D's quotes of B (bid, ask and seq as columns of one row per quote), per sym in (ts, exchange,
// seq) order, numbered 1, 2, … (several quotes at one ts are steps of their own). Each step
// holds its own venue's bid and ask and is paired with each other venue the sym has, with
// none; per (sym, venue), in step order, they are filled forward, so every pair holds the
// venue's latest quote so far (none before its first). nbb is the greatest bid and nbo the
// least ask of a step's pairs (sorted, the first row of each step kept), and a step is a
// change where either differs from the step before (difference() is not 0; the first step,
// with no step before it, always is).
import "join"

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
        |> map(fn: (r) => ({sym: r.sym, exchange: r.exchange, bid: r.bid, ask: r.ask, step: 1}))
        |> cumulativeSum(columns: ["step"])
venues =
    steps
        |> keep(columns: ["sym", "exchange"])
        |> unique(column: "exchange")
others =
    join.inner(
        left: steps,
        right: venues,
        on: (l, r) => l.sym == r.sym,
        as: (l, r) => ({sym: l.sym, venue: r.exchange, step: l.step, own: l.exchange == r.exchange}),
    )
        |> filter(fn: (r) => not r.own)
        |> drop(columns: ["own"])
held =
    union(tables: [steps |> rename(columns: {exchange: "venue"}), others])
        |> group(columns: ["sym", "venue"])
        |> sort(columns: ["step"])
        |> fill(column: "bid", usePrevious: true)
        |> fill(column: "ask", usePrevious: true)
        |> filter(fn: (r) => exists r.bid)
        |> group(columns: ["sym"])
nbb =
    held
        |> sort(columns: ["step", "bid"], desc: true)
        |> unique(column: "step")
        |> keep(columns: ["sym", "step", "bid"])
nbo =
    held
        |> sort(columns: ["step", "ask"])
        |> unique(column: "step")
        |> keep(columns: ["sym", "step", "ask"])

join.inner(
    left: nbb,
    right: nbo,
    on: (l, r) => l.sym == r.sym and l.step == r.step,
    as: (l, r) => ({sym: l.sym, step: l.step, nbb: l.bid, nbo: r.ask, dnbb: l.bid, dnbo: r.ask}),
)
    |> sort(columns: ["step"])
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
