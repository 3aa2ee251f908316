"""The market suite's declaration and protocol (SPEC §2.3): on a market dataset, each engine that
serves the market dataset kind (``engine.toml``'s ``kinds``) loads the 20 days in its own schema;
then every M- query is verified and timed, M-W loads day D into fresh stores and M-SE measures
the loaded days, through the shared protocol of :mod:`tickbench.suites.cells`; the users cells
(:mod:`tickbench.suites.market.users`) run M-VWAB-12D, M-SNAP and M-STATS-UI by several users at
once, each with its own client and parameters. With ``--save-answers`` the drawn parameters go to
``answers/<engine>/params.json`` (SPEC §4) beside the answers."""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar

from pydantic import ConfigDict

from tickbench.datasets.market.params import MarketParams, universe_reasons, users_reason, write_params_json
from tickbench.engines.base import Engine
from tickbench.report.widgets import PageParts, Section, SuiteView
from tickbench.results import Record
from tickbench.run.cell import CellContext
from tickbench.suites.base import Option, Options, Suite, WorkerOp, parse_counts, parse_rates, rate_label
from tickbench.suites.cells import WORKER_OPS, Cells, LoadStorageFigures
from tickbench.suites.market import BY_ID, LOADS, QUERY_IDS, during_ingest
from tickbench.suites.market import report as report_module
from tickbench.suites.market.during_ingest import DuringIngest, IngestFigures, parse_ingest_id
from tickbench.suites.market.ingest_ops import ingest_op
from tickbench.suites.market.ops import users_op
from tickbench.suites.market.users import (
    CATEGORY,
    UI_USERS,
    USERS_SECONDS,
    VWAB_USERS,
    Users,
    UsersFigures,
    parse_id,
)
from tickbench.suites.market.users import cell_ids as users_cells

if TYPE_CHECKING:
    from tickbench.engines.base import EngineInfo


class MarketFigures(LoadStorageFigures, UsersFigures, IngestFigures):
    """A market cell's figures: M-W's and M-SE's, a users cell's or a during-ingest cell's."""

    model_config = ConfigDict(extra="allow")  # as LoadStorageFigures's


def _non_negative(v: int) -> str | None:
    return None if v >= 0 else "must be 0 (none) or more"


def _positive(v: float) -> str | None:
    return None if v > 0 else "must be positive"


class MarketSuite(Suite):
    name = "market"
    title = "The market suite (many instruments, after STAC-M3)"
    order = 5
    summary = ("15 questions over a universe of instruments on eight venues (SPEC §2.3), by 1 to 100 users, "
               "M-W and M-SE")
    dataset_kind = "market"
    figures_model = MarketFigures
    options = (
        Option("users", VWAB_USERS, "M-VWAB-12D's concurrent user counts, each user its own client (STAC-M3's 1T, "
               "10T, 50T, 100T)", kind="text", parse=lambda t: parse_counts(t, "--users"),
               text_default=",".join(map(str, VWAB_USERS)), decode=tuple),
        Option("users_seconds", USERS_SECONDS, "users cells: each user keeps running its query until this many "
               "seconds after the users' common start (and at least 20 times), so that every query is timed with "
               "every other user running (0: 20 queries each)", kind="float", check=_non_negative),
        Option("ui_users", UI_USERS, "concurrent users of M-SNAP and M-STATS-UI, each with its own parameters "
               "(0: none), and of M-SNAP during ingest", check=_non_negative),
        Option("ingest_rates", during_ingest.RATES, "M-SNAP during ingest: day D's events replayed at these "
               "rates, events/s or max", kind="text", parse=lambda t: parse_rates(t, "--ingest-rates"),
               text_default="10000,100000,max", decode=tuple),
        Option("ingest_writers", during_ingest.WRITERS, "M-SNAP during ingest: writer clients per cell",
               kind="text", parse=lambda t: parse_counts(t, "--ingest-writers"), text_default="1,2", decode=tuple),
        Option("ingest_minutes", during_ingest.SPAN_MINUTES, "M-SNAP during ingest: every cell replays day D's "
               "first minutes of events, the same span for every engine", kind="float", check=_positive),
        Option("ingest_seconds", during_ingest.CAP_SECONDS, "M-SNAP during ingest: the most seconds one replay of "
               "the span may take (an engine slower than that covers less of it, noted in the cell)",
               kind="float", check=_positive),
        Option("ingest_batch", 1000, "M-SNAP during ingest: events per write as fast as possible, the most at a "
               "fixed rate", check=lambda v: None if v >= 1 else "must be at least 1"),
    )
    own_sections = True
    report: ClassVar[ModuleType | None] = report_module
    worker_ops: ClassVar[dict[str, WorkerOp]] = {**WORKER_OPS, "market_users": users_op, "market_ingest": ingest_op}
    endpoint_refusal = ("its tables (instruments, quotes, trades) are not yet created in a namespace of their own "
                        "on a user's server; run it on a server tickbench starts")

    def cell_ids(self, opts: Options, engine: type[Engine]) -> list[str]:
        return [*QUERY_IDS, *users_cells(opts["users"], opts["ui_users"]),
                *during_ingest.cell_ids(opts["ingest_rates"], opts["ingest_writers"], opts["ui_users"]), *LOADS]

    def category(self, benchmark: str) -> str:
        if parse_id(benchmark) is not None:
            return CATEGORY
        if parse_ingest_id(benchmark) is not None:
            return "during ingest"
        return BY_ID[benchmark].category if benchmark in BY_ID else "write/storage"

    def support(self, engine: type[Engine], info: EngineInfo) -> str:
        reason = self.refusal(engine, info)
        if reason is not None:
            return f"— {reason}"
        gaps = [q for q in QUERY_IDS if q in info.unsupported]
        return "✔" + (f" but {', '.join(gaps)}" if gaps else "")

    def run(self, ctx: CellContext, todo: list[str]) -> None:
        """Start the engine and load the market dataset, then every query, users cell, M-W and M-SE
        of ``todo``."""
        params = ctx.params
        if not isinstance(params, MarketParams):
            raise TypeError("the market suite runs with the market dataset's parameters")
        if ctx.protocol.save_answers is not None:
            write_params_json(ctx.protocol.save_answers / ctx.info.name / "params.json", params)
        todo = self._applicable(ctx, params, todo)
        if not todo:
            return
        worker = ctx.worker("engine", load=True)
        if not worker.start_or_fail(todo, then=lambda: ctx.meta.update(worker.call(60, op="info"))):
            return
        cells = Cells(ctx, worker, list(params.M), w_id="M-W", se_id="M-SE")
        users = Users(ctx, worker)
        ingest = DuringIngest(ctx, worker, users)
        try:
            for bench in todo:
                if parse_id(bench) is not None:
                    ctx.on_record(users.cell(bench))
                elif parse_ingest_id(bench) is not None:
                    ctx.on_record(ingest.cell(bench))
                elif bench == "M-W":
                    ctx.on_record(cells.w())
                elif bench == "M-SE":
                    ctx.on_record(cells.se())
                else:
                    ctx.on_record(cells.query(bench))
        finally:
            worker.close()

    def dataset_notes(self, universe: int) -> list[str]:
        return universe_notes(universe)

    def _applicable(self, ctx: CellContext, params: MarketParams, todo: list[str]) -> list[str]:
        """Record, before anything starts or loads, each cell of ``todo`` the universe cannot serve
        as ``not_applicable`` with why; the cells left to run."""
        left = []
        for bench in todo:
            why = not_applicable(bench, dict(params.unserved), ctx.ds.universe)
            if why is None:
                left.append(bench)
                continue
            users, ingest = parse_id(bench), parse_ingest_id(bench)
            figures = ({"query": users[0], "users": users[1]} if users is not None else
                       {"rate": rate_label(ingest[0]), "writers": ingest[1]} if ingest is not None else None)
            ctx.record(bench, "not_applicable", why, figures=figures)
        return left

    def report_html(self, view: SuiteView) -> PageParts[list[Section]]:
        return PageParts([Section("market", "Market", report_module.page_html(view))], [], [])

    def report_markdown(self, view: SuiteView) -> PageParts[list[str]]:
        return PageParts(report_module.page_markdown(view), [], [])

    def cell_text(self, record: Record) -> str:
        return report_module.cell_text(record)

    def headline(self, record: Record) -> str:
        return report_module.cell_text(record)


def not_applicable(bench: str, unserved: Mapping[str, str], universe: int) -> str | None:
    """Why cell ``bench`` cannot run on a universe of ``universe`` instruments whose unserved
    parameters are ``unserved`` (:attr:`~tickbench.datasets.market.params.MarketParams.unserved`): a
    parameter it binds, or more M-VWAB-12D users than the universe has disjoint blocks for;
    ``None`` when it can run."""
    if (users := parse_id(bench)) is not None:
        qid, count = users
        if qid == "M-VWAB-12D":
            return users_reason(count, universe)
        bench = qid
    elif parse_ingest_id(bench) is not None:
        bench = "M-SNAP"
    needs = BY_ID[bench].needs if bench in BY_ID else ()
    return next((unserved[n] for n in needs if n in unserved), None)


def universe_notes(universe: int, opts: Options | None = None) -> list[str]:
    """What a run of the market suite (with ``opts``, else its defaults) will record as not
    applicable on a universe of ``universe`` instruments, one line per reason: for ``import``,
    ``generate`` and ``validate`` to say (a note, not a refusal)."""
    unserved = universe_reasons(universe)
    by_reason: dict[str, list[str]] = {}
    for bench in SUITE.cell_ids({**SUITE.defaults(), **(opts or {})}, Engine):
        why = not_applicable(bench, unserved, universe)
        if why is not None:
            cells = by_reason.setdefault(why, [])
            name = f"{during_ingest.PREFIX}…" if parse_ingest_id(bench) is not None else bench
            if name not in cells:
                cells.append(name)
    return [f"{', '.join(cells)}: not applicable ({why})" for why, cells in by_reason.items()]


SUITE = MarketSuite()
