"""InfluxDB's Flux files (the market queries InfluxQL cannot express): the query file is the one
that exists, values are bound as literals of Flux's AST (never parsed as Flux), answers are read
from Flux's annotated CSV; and on a real server, M-NBBO, M-ASOF and M-VOLCURV keep SPEC §2.3's
tie rules on quotes tied on their time and trades outside the session."""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.market import reference as market_reference
from tickbench.datasets.market.params import MarketParams
from tickbench.datasets.market.reference import REFERENCES
from tickbench.engines.influxdb.results import flux_frame, flux_literal, flux_program
from tickbench.engines.registry import adapter, availability, engine_infos
from tickbench.run.visibility import wait_settled, wait_visible
from tickbench.suites.market import QUERY_IDS
from tickbench.verify import compare, normalize

installed = availability("influxdb")
needs_install = pytest.mark.skipif(
    not installed.available, reason=f"influxdb is not installed: {installed.reason}")
FLUX = ("M-NBBO", "M-VOLCURV", "M-ASOF")
HOSTILE = 'a "quoted" \\ back${slash}\n, comma ü'
# A venue name written to break out of @index's string comparison into Flux code.
HOSTILE_VENUE = 'X" then "0" else die(msg: "owned")) // r.b0'
# @index, @fill, @max and @min over a list of venues (M-NBBO's pivot by venue): three steps of
# one group, quoting venues 0, 1 (hostile) and 0 again; venue 2 never quotes (no column b2).
VENUE_SCRIPT = """import "array"
array.from(rows: [{g: "x", step: 1, ex: venues_0, p: 2.0}, {g: "x", step: 2, ex: venues_1, p: 5.0},
                  {g: "x", step: 3, ex: EX, p: 1.0}])
    |> map(fn: (r) => ({g: r.g, step: r.step, side: "b" + @index(r.ex, venues), p: r.p}))
    |> group(columns: ["g"])
    |> pivot(rowKey: ["step"], columnKey: ["side"], valueColumn: "p")
    |> sort(columns: ["step"])
    |> @fill(b, venues)
    |> map(
        fn: (r) => {
            @max(hi = r.b, venues)
            @min(lo = r.b, venues)

            return {step: r.step, hi: hi, lo: lo}
        },
    )
"""


def test_the_three_are_flux_and_every_other_query_influxql() -> None:
    info = engine_infos()["influxdb"]
    for qid in QUERY_IDS:  # query_file raises where an id has two files
        assert info.query_file(qid).suffix == (".flux" if qid in FLUX else ".influxql"), qid
        assert qid not in info.unsupported


def test_two_files_for_one_id_are_an_error(tmp_path: Path) -> None:
    from tickbench.engines.base import EngineInfo

    info = engine_infos()["influxdb"]
    (tmp_path / "queries").mkdir()
    for ext in ("influxql", "flux"):
        (tmp_path / "queries" / f"M-X.{ext}").write_text("")
    twin = EngineInfo(**{**info.__dict__, "folder": tmp_path})
    with pytest.raises(ValueError, match="2 query files"):
        twin.query_file("M-X")
    assert twin.query_file("M-Y").name == "M-Y.influxql"  # none: the main extension's path


def test_values_are_literals_of_the_ast_and_lists_are_numbered() -> None:
    binds: dict[str, Any] = {"b_syms": [HOSTILE, "S1"], "d_start": dt.datetime(2024, 1, 16, 14, 30, 0, 5),
                             "day": dt.date(2024, 1, 16), "k": -5, "f": 2.5, "unused": "x"}
    script, extern = flux_program("filter(fn: (r) => @in(r.sym, b_syms)) |> range(start: d_start) k f day", binds)
    assert script.startswith("filter(fn: (r) => (r.sym == b_syms_0 or r.sym == b_syms_1)) |>")
    bound = {a["id"]["name"]: a["init"] for a in extern["body"]}
    assert set(bound) == {"b_syms_0", "b_syms_1", "d_start", "day", "k", "f"}  # only what it uses
    assert bound["b_syms_0"] == {"type": "StringLiteral", "value": HOSTILE}
    assert bound["d_start"] == {"type": "DateTimeLiteral", "value": "2024-01-16T14:30:00.000005Z"}
    assert bound["day"] == {"type": "DateTimeLiteral", "value": "2024-01-16T00:00:00Z"}
    assert bound["k"] == {"type": "UnaryExpression", "operator": "-",
                          "argument": {"type": "IntegerLiteral", "value": "5"}}
    assert bound["f"] == {"type": "FloatLiteral", "value": 2.5}
    with pytest.raises(ValueError, match="an empty list"):
        flux_program("@in(r.sym, b_syms)", {"b_syms": []})
    with pytest.raises(ValueError, match="not a list binding"):
        flux_program("@in(r.sym, d_start)", binds)
    with pytest.raises(ValueError, match="no literal"):
        flux_literal(float("nan"))


def test_venue_macros_name_columns_by_place_never_by_value() -> None:
    """@index compares with bound values and yields places; @fill and @max/@min name columns
    by prefix and place: a hostile venue name is a literal of the extern, never in the script."""
    venues = ["v0", HOSTILE_VENUE, HOSTILE]
    script, extern = flux_program(VENUE_SCRIPT.replace("EX", "venues_0"), {"venues": venues})
    assert HOSTILE_VENUE not in script and "owned" not in script and "@" not in script
    assert ('(if r.ex == venues_0 then "0" else if r.ex == venues_1 then "1" else if r.ex == venues_2 then "2" '
            'else die(msg: "ex: a value not in venues"))') in script
    assert ('fill(column: "b0", usePrevious: true) |> fill(column: "b1", usePrevious: true) '
            '|> fill(column: "b2", usePrevious: true)') in script
    assert "            hi1 = if not exists hi0 or r.b1 > hi0 then r.b1 else hi0\n" in script
    assert "            lo2 = if not exists lo1 or r.b2 < lo1 then r.b2 else lo1\n            lo = lo2\n" in script
    bound = {a["id"]["name"]: a["init"] for a in extern["body"]}
    assert bound == {f"venues_{i}": {"type": "StringLiteral", "value": v} for i, v in enumerate(venues)}
    for bad in ("@index(r.ex, venues)", "@fill(b, venues)", "@max(m = r.b, venues)"):
        with pytest.raises(ValueError, match="an empty list"):
            flux_program(bad, {"venues": []})
        with pytest.raises(ValueError, match="not a list binding"):
            flux_program(bad, {"venues": "v0"})


def test_annotated_csv_becomes_typed_columns() -> None:
    text = ("#datatype,string,long,string,long,double,dateTime:RFC3339\r\n"
            ",result,table,sym,n,x,_time\r\n"
            ',_result,0,"A,B",3,0.1,2024-01-16T14:30:00.000269Z\r\n'
            ",_result,1,C,,1e-05,2024-01-16T14:30:00Z\r\n\r\n"
            "#datatype,string,long,string,boolean\r\n,result,table,sym,ok\r\n,_result,2,D,true\r\n\r\n")
    frame = flux_frame(text)
    assert frame.columns == ["sym", "n", "x", "_time", "ok"]
    assert frame["sym"].to_list() == ["A,B", "C", "D"] and frame["n"].to_list() == [3, None, None]
    assert frame["x"].to_list() == [0.1, 1e-05, None] and frame["ok"].to_list() == [None, None, True]
    assert frame["_time"].to_list()[:2] == [1_705_415_400_000_269_000, 1_705_415_400_000_000_000]
    assert flux_frame("\r\n").height == 0
    # A query that fails after its answer began: Flux ends the answer with an error table.
    begun = "#datatype,string,long,long\r\n,result,table,x\r\n,_result,0,1\r\n\r\n"
    with pytest.raises(RuntimeError, match="boom"):
        flux_frame(begun + "#datatype,string,string\r\n,error,reference\r\n,runtime error @3:8: boom,\r\n")


# -- on a server -----------------------------------------------------------------------------

@pytest.fixture
def workdir() -> Iterator[Path]:
    # Not under pytest's tmp_path: influxd may run as an unprivileged user, which must reach it.
    d = Path(tempfile.mkdtemp(prefix="tickbench-influxdb-flux-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _renumbered(quotes: pl.DataFrame) -> pl.DataFrame:
    """``quotes`` (with an ``added`` rank: 0 for the day's own) with seq renumbered per
    (exchange, sym) in (ts, added, seq) order: unique and increasing with ts, an added quote
    after the ones already at its time."""
    return (quotes.sort("exchange", "sym", "ts", "added", "seq")
            .with_columns(seq=pl.int_range(pl.len(), dtype=pl.Int64).over("exchange", "sym"))
            .drop("added"))


def _hostile_day(quotes: pl.DataFrame, trades: pl.DataFrame, p: MarketParams) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Day D with ties: every third quote of B is followed at its own ts by a quote of another
    venue of its sym that locks it (bid = its ask) and by one of its own venue a tick lower; each
    trade of B50 gets two quotes of its own venue at its very ts, the second (greater seq) wider;
    and trades of B's first sym before the session's open, after its close and either side of
    midnight."""
    quotes = quotes.with_columns(added=pl.lit(0))
    venues = quotes.group_by("sym").agg(pl.col("exchange").unique().sort()).select(
        "sym", v0=pl.col("exchange").list.get(0), v1=pl.col("exchange").list.get(1, null_on_oob=True))
    base = (quotes.filter(pl.col("sym").is_in(list(p.B))).with_row_index("i").filter(pl.col("i") % 3 == 0).drop("i")
            .join(venues, on="sym"))
    other = base.filter(pl.col("v1").is_not_null()).with_columns(
        exchange=pl.when(pl.col("exchange") == pl.col("v0")).then(pl.col("v1")).otherwise(pl.col("v0")),
        bid=pl.col("ask"), ask=pl.col("ask") + 0.05, added=pl.lit(1))
    own = base.with_columns(bid=pl.col("bid") - 0.01, added=pl.lit(2))
    t50 = trades.filter(pl.col("sym").is_in(list(p.B50)))
    at_trade = [t50.select("ts", "exchange", "sym", bid=pl.col("price") - 0.05 * k, ask=pl.col("price") + 0.1 * k,
                           bsize=pl.lit(1.0), asize=pl.lit(1.0), seq=pl.lit(0, pl.Int64), added=pl.lit(k))
                for k in (1, 2)]
    cols = quotes.columns
    tied = _renumbered(pl.concat([quotes, *(f.select(cols) for f in (other, own, *at_trade))], how="vertical_relaxed"))
    sym = sorted(p.B)[0]
    last = trades.filter(pl.col("sym") == sym).sort("ts").tail(1)
    day = dt.datetime.fromisoformat(p.D).replace(tzinfo=dt.UTC)
    at = (dt.timedelta(minutes=1), dt.timedelta(hours=14, minutes=27, seconds=30), dt.timedelta(hours=21, minutes=3),
          dt.timedelta(hours=23, minutes=58, seconds=30))
    outside = pl.concat([last.with_columns(ts=pl.lit(day + t), trade_id=pl.col("trade_id") + i)
                         for i, t in enumerate(at, 1)])
    return tied, pl.concat([trades, outside.select(trades.columns).cast(trades.schema)])  # type: ignore[arg-type]


@pytest.mark.server
@needs_install
def test_flux_queries_keep_the_tie_rules(market_tiny: Dataset, market_tiny_params: MarketParams, workdir: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from tickbench.engines.influxdb.market import quote_lines, trade_lines

    p = market_tiny_params
    day = {t: pl.read_parquet(market_tiny.files(t, [p.D])) for t in ("quotes", "trades")}
    quotes, trades = _hostile_day(day["quotes"], day["trades"], p)
    assert quotes.height > day["quotes"].height and trades.height == day["trades"].height + 4
    frames = {"quotes": quotes, "trades": trades}

    def scan(ds: Dataset, table: str, days: Any, cols: list[str], syms: Any = None) -> pl.LazyFrame:
        lf = frames[table].lazy()  # the reference over the hostile day (the only day written)
        return (lf if syms is None else lf.filter(pl.col("sym").is_in(list(syms)))).select(cols)

    monkeypatch.setattr(market_reference, "_scan", scan)
    engine = adapter("influxdb", workdir, market_tiny, p)
    engine.start()
    try:
        engine._market_write(engine.db, [quote_lines(quotes), trade_lines(trades)],  # type: ignore[attr-defined]
                             quotes.height + trades.height)
        wait_visible(engine)
        wait_settled(engine)
        for qid in FLUX:
            engine.query_server_ns()  # the counters from here
            got = pl.from_arrow(engine.run_query(qid))
            server_ns = engine.query_server_ns()
            want = REFERENCES[qid](market_tiny, p)
            assert want.height > 0
            assert compare(normalize(got, want), want).ok, qid  # type: ignore[arg-type]
            assert server_ns is not None and server_ns > 0, qid  # fluxQueryReqDurationNs grew
            assert engine.explain(qid) is None and "Flux" in engine.query_notes(qid)
        # The hostile day has what it is for: locked steps, buckets before the open and after the close.
        assert (REFERENCES["M-NBBO"](market_tiny, p)["n_locked"] > 0).any()
        buckets = REFERENCES["M-VOLCURV"](market_tiny, p)["bucket"]
        assert (buckets < 0).any() and (buckets >= 390).any()
        # An imported calendar's open off the five-minute marks (14:32): buckets still count from it.
        engine.params = shifted = replace(p, session=(p.session[0] + 120, p.session[1]))
        want = REFERENCES["M-VOLCURV"](market_tiny, shifted)
        assert not want.equals(REFERENCES["M-VOLCURV"](market_tiny, p))
        assert compare(normalize(pl.from_arrow(engine.run_query("M-VOLCURV")), want), want).ok  # type: ignore[arg-type]
    finally:
        engine.stop()


@pytest.mark.server
@needs_install
def test_bound_values_reach_flux_unchanged(market_tiny: Dataset, market_tiny_params: MarketParams,
                                           workdir: Path) -> None:
    engine = adapter("influxdb", workdir, market_tiny, market_tiny_params)
    engine.start()
    try:
        at = dt.datetime(2024, 1, 16, 14, 30, 0, 123456)
        script, extern = flux_program(
            'import "array"\narray.from(rows: [{s: s, t: t, k: k, f: f}, {s: "no", t: t, k: k, f: f}])'
            "\n    |> filter(fn: (r) => @in(r.s, names))",
            {"s": HOSTILE, "t": at, "k": -7, "f": -0.1, "names": ["x", HOSTILE]})
        got = flux_frame(engine._flux(script, extern))  # type: ignore[attr-defined]
        # The filter kept the row whose s equals the bound name, newline and all, on the server.
        # Flux's CSV (Go's encoding/csv with CRLF line ends) writes a line break inside a string
        # as CRLF: names with line breaks never reach an answer (datasets refuse them).
        assert got.to_dicts() == [{"s": HOSTILE.replace("\n", "\r\n"), "t": 1_705_415_400_123_456_000,
                                   "k": -7, "f": -0.1}]
        with pytest.raises(RuntimeError, match="Flux query failed"):
            engine._flux("this is not Flux", extern)  # type: ignore[attr-defined]
        # The venue macros on the server, a hostile venue name among the bound values: the
        # greatest and least of each step's latest prices per venue (venue 2 never quotes).
        venues = ["v0", HOSTILE_VENUE, HOSTILE]
        got = flux_frame(engine._flux(*flux_program(  # type: ignore[attr-defined]
            VENUE_SCRIPT.replace("EX", "venues_0"), {"venues": venues})))
        assert got.sort("step").to_dicts() == [{"step": 1, "hi": 2.0, "lo": 2.0}, {"step": 2, "hi": 5.0, "lo": 2.0},
                                               {"step": 3, "hi": 5.0, "lo": 1.0}]
        with pytest.raises(RuntimeError, match="ex: a value not in venues"):  # a venue not in the list
            engine._flux(*flux_program(VENUE_SCRIPT.replace("EX", '"v9"'), {"venues": venues}))  # type: ignore[attr-defined]
    finally:
        engine.stop()
