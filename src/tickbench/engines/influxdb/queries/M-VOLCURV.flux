// Flux, not InfluxQL: InfluxQL cannot fold days onto one another (GROUP BY time() buckets are
// absolute intervals, time is not a value it can take modulo a day, and 1.x refuses time
// ranges joined by OR). Flux can compute with a row's time.
// One-minute sums of each trade series over M, which InfluxDB computes in the storage engine
// (window |> sum right after the filtered read is pushed down). A window's start, as whole
// minutes since the session's open of its UTC day floored to a multiple of 5 (before the open
// too; Flux's / truncates toward 0), is its bucket, and the windows of a (sym, bucket) over
// every series and day are summed. Minutes, not five: a minute never straddles midnight,
// while five-minute windows aligned to an open off the five-minute marks (say 14:32) would.
from(bucket: db)
    |> range(start: m_start, stop: m_end)
    |> filter(fn: (r) => r._measurement == "trades" and r._field == "amount" and @in(r.sym, b_syms))
    |> window(every: 1m, createEmpty: false)
    |> sum()
    |> map(
        fn: (r) => {
            minute = int(v: r._start) % 86400000000000 / 60000000000 - session_open_minute
            bucket = if minute >= 0 then minute / 5 * 5 else (minute - 4) / 5 * 5

            return {sym: r.sym, bucket: bucket, _value: r._value}
        },
    )
    |> group(columns: ["sym", "bucket"])
    |> sum()
    |> group()
    |> map(fn: (r) => ({sym: r.sym, bucket: r.bucket, avg_volume: r._value / float(v: m_day_count)}))
