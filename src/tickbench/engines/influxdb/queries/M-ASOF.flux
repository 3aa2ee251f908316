// Flux, not InfluxQL: InfluxQL has no as-of (or any) join, and nothing that carries a quote
// forward to a trade of another measurement. Flux unions the two and fills forward.
// D's quotes of B50 (bid, ask and seq as columns of one row per quote) and trades (price, with
// a seq above any quote's), one stream per (exchange, sym) sorted by (time, seq): a trade comes
// after the quotes of its own time (ts <= t is inclusive), and of several quotes at one time
// the latest, of greatest seq, last. A trade's row has no bid or ask, so filling them forward
// gives each trade its venue's latest quote; the trades that have one are kept.
import "math"

quotes =
    from(bucket: db)
        |> range(start: d_start, stop: d_end)
        |> filter(
            fn: (r) =>
                r._measurement == "quotes" and (r._field == "bid" or r._field == "ask" or r._field == "seq")
                    and @in(r.sym, b50_syms),
        )
        |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")
        |> keep(columns: ["_time", "exchange", "sym", "seq", "bid", "ask"])
trades =
    from(bucket: db)
        |> range(start: d_start, stop: d_end)
        |> filter(fn: (r) => r._measurement == "trades" and r._field == "price" and @in(r.sym, b50_syms))
        |> map(fn: (r) => ({r with seq: 9223372036854775807}))
        |> rename(columns: {_value: "price"})
        |> keep(columns: ["_time", "exchange", "sym", "seq", "price"])

union(tables: [quotes, trades])
    |> group(columns: ["exchange", "sym"])
    |> sort(columns: ["_time", "seq"])
    |> fill(column: "bid", usePrevious: true)
    |> fill(column: "ask", usePrevious: true)
    |> filter(fn: (r) => exists r.price and exists r.bid)
    |> map(fn: (r) => ({sym: r.sym, eff: 2.0 * math.abs(x: r.price - (r.bid + r.ask) / 2.0) / ((r.bid + r.ask) / 2.0)}))
    |> group(columns: ["sym"])
    |> reduce(
        fn: (r, accumulator) => ({n: accumulator.n + 1, total: accumulator.total + r.eff}),
        identity: {n: 0, total: 0.0},
    )
    |> group()
    |> map(fn: (r) => ({sym: r.sym, n: r.n, eff_spread: r.total / float(v: r.n)}))
