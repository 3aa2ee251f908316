"""The suite contract.

A suite lives in one package, ``suites/<name>/`` (``-`` in the suite's name is ``_`` in the
folder's), whose ``suite.py`` defines ``SUITE``, an instance of a :class:`Suite` subclass. It
declares, as data:

* its name (the ``--suite`` value, the first part of its benchmark ids, the results' ``suite``),
  title and place in ``--suite all`` and in the reports (``order``);
* its options (:class:`Option`): each becomes a ``tickbench run`` flag, grouped under the
  suite's title in ``tickbench run --help``, and is recorded in ``results.json``;
* what it requires of an engine (:meth:`Suite.requires`: a reason when the engine cannot take
  part, recorded in every cell as ``unsupported``), beside the dataset kind it runs on, which
  the engine must serve (``dataset_kind``, the engine's ``kinds``; :meth:`Suite.refusal` asks both);
* its cells (:meth:`Suite.cell_ids`) and how to run them (:meth:`Suite.run`, through a
  :class:`~tickbench.run.cell.CellContext` that owns workers, failures and records);
* the operations it adds to the engine's process (``worker_ops``: module-level functions that
  run inside that process and time their own work there; handed to the process when the
  runner spawns it, so the runner names none of them);
* whether it can run against a server tickbench does not run (``endpoint_refusal``: the
  reason it cannot, the default for a suite that does not declare otherwise) and which of its
  cells are not measured there (``endpoint_unmeasured``);
* the typed model of its records' ``figures`` (``figures_model``), checked when a record is
  made and when results are read;
* its sections in the reports (:meth:`Suite.report_html`, :meth:`Suite.report_markdown`; by
  default its ``report`` module's ``markdown(records)`` and ``html(records, add_chart)``, one
  section in the group of further suites), its one figure per cell in the terminal
  (:meth:`Suite.headline`, :meth:`Suite.cell_text`) and what ``tickbench compare`` compares of
  a cell (:meth:`Suite.measures`); the reports read a suite through
  :class:`~tickbench.report.sections.ReportSuite`, which :class:`Suite` implements.

Discovery (:mod:`tickbench.suites.registry`) finds every such package, so adding a suite
edits no other file. Suites never read a clock outside their worker operations: they drive
engine processes through :class:`~tickbench.run.cell.Worker`'s verbs, and a failed cell is
handled by :meth:`~tickbench.run.cell.Worker.attempt`. The runner reads a suite through
:class:`~tickbench.run.cell.RunnableSuite`, which :class:`Suite` implements.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from tickbench.data.dataset import DEFAULT_KIND, shown
from tickbench.report.cells import Measure, cell_text, timing_measures
from tickbench.report.widgets import AddChart, PageParts, Section, SuiteView
from tickbench.results import Record
from tickbench.run.cell import CellContext, Options, WorkerOp

if TYPE_CHECKING:
    from tickbench.engines.base import Engine, EngineInfo

__all__ = ["AddChart", "Option", "OptionError", "Options", "Suite", "WorkerOp"]

#: Why a suite that says nothing of external endpoints does not run against one.
UNDECLARED_ENDPOINT = ("the suite does not declare that it can run against a server tickbench does not run "
                       "(its endpoint_refusal)")


class OptionError(ValueError):
    """An option value that cannot be used; the message names the flag and the expected form."""


@dataclass(frozen=True)
class Option:
    """One suite option and its ``tickbench run`` flag (``--`` + name with ``-`` for ``_``).

    ``kind`` is ``int``, ``float`` or ``text``; a ``text`` option is given as text and turned
    into its value by ``parse``. ``check`` returns why a value cannot be used (or ``None``).
    ``decode`` rebuilds a value from its JSON form (tuples come back as lists).
    """

    name: str
    default: Any
    help: str
    kind: str = "int"
    parse: Callable[[str], Any] | None = None
    text_default: str | None = None
    check: Callable[[Any], str | None] | None = None
    decode: Callable[[Any], Any] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def value(self, given: Any) -> Any:
        """The option's value from what the command line gave (text for ``text`` options)."""
        value = self.parse(given) if self.kind == "text" and self.parse is not None else given
        problem = self.check(value) if self.check is not None else None
        if problem:
            raise OptionError(f"{self.flag} {given}: {problem}")
        return value

    def from_json(self, raw: Any) -> Any:
        """The value a results file records, checked as the command line's is (a resumed run
        reads it back): :class:`OptionError` naming the flag when it could not have been given."""
        if self.kind == "text" and self.parse is not None:  # through its text form, and the same parse
            return self.value(_text_form(raw))
        numeric = (int,) if self.kind == "int" else (int, float)
        if isinstance(raw, bool) or not isinstance(raw, numeric) or not math.isfinite(raw):
            raise OptionError(f"{self.flag} {shown(raw)}: not {'an integer' if self.kind == 'int' else 'a number'}")
        return self.value(self.decode(raw) if self.decode is not None else raw)


# -- option parsers more than one suite uses ---------------------------------------------------


def parse_counts(text: str, option: str) -> tuple[int, ...]:
    """``"1,2,4"`` → ``(1, 2, 4)``, every count positive; a count given twice (``1,01,1``) once."""
    items = [s.strip() for s in text.split(",")]
    if not all(s.isascii() and s.isdigit() and int(s) > 0 for s in items):  # "²".isdigit() is True
        raise OptionError(f"{option} {text}: expected positive integers separated by commas, e.g. 1,2,4")
    return tuple(dict.fromkeys(int(s) for s in items))


def parse_rates(text: str, option: str) -> tuple[int | None, ...]:
    """``"10000,100000,max"`` → ``(10000, 100000, None)``; ``max`` is as fast as possible."""
    out: list[int | None] = []
    for item in text.split(","):
        item = item.strip().lower()
        if item == "max":
            out.append(None)
        elif item.isascii() and item.isdigit() and int(item) > 0:  # "²" is a digit to isdigit(), not to int()
            out.append(int(item))
        else:
            raise OptionError(f"{option} {text}: expected positive events/s or 'max', e.g. 10000,100000,max")
    return tuple(dict.fromkeys(out))  # a rate given twice, once


def rate_label(rate: int | None) -> str:
    """A rate as its cell ids and figures write it: events/s, or ``max``."""
    return "max" if rate is None else str(rate)


def _text_form(raw: Any) -> str:
    """A text option's value as results.json records it (a list of counts, rates (``null`` for
    max), names, or ``[x, y]`` pairs) in the form its flag takes: ``1,2``, ``10000,max``, ``1x100``."""
    items = raw if isinstance(raw, list | tuple) else [raw]

    def one(x: Any) -> str:
        if x is None:
            return "max"
        if isinstance(x, list | tuple) and len(x) == 2:
            return f"{one(x[0])}x{one(x[1])}"
        if isinstance(x, bool) or not isinstance(x, int | str):
            return shown(x)
        return str(x)

    return ",".join(one(x) for x in items)


class Suite(ABC):
    """One suite: its declarations (class attributes) and its protocol."""

    name: ClassVar[str]
    title: ClassVar[str]
    #: Where the suite comes in ``--suite all`` and in the reports (lower first).
    order: ClassVar[int] = 100
    #: One line for docs: what the suite measures.
    summary: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()
    figures_model: ClassVar[type[BaseModel] | None] = None
    worker_ops: ClassVar[dict[str, WorkerOp]] = {}
    #: The name of the dataset kind the suite runs on (``tickbench.datasets.base.kinds``; by
    #: default the paper's, SPEC §1).
    dataset_kind: ClassVar[str] = DEFAULT_KIND
    #: Whether an engine must serve :attr:`dataset_kind` (its ``engine.toml``'s ``kinds``) to take
    #: part: the suite loads the dataset into it, or streams into its ingest store, through the
    #: engine's part for that kind. A suite that only reads the dataset's files beside an open
    #: engine sets it ``False``.
    kind_served: ClassVar[bool] = True
    #: The engine-process operation that loads the suite's data (a core one, or one of its own).
    load_op: ClassVar[str] = "load"
    #: Why the suite cannot run against an external endpoint (``None``: it can). Refused
    #: unless a suite says otherwise: a new suite is never let loose on a user's own server.
    endpoint_refusal: ClassVar[str | None] = UNDECLARED_ENDPOINT
    #: The suite's cells not measured against an external endpoint, each with the reason.
    endpoint_unmeasured: ClassVar[dict[str, str]] = {}
    #: The suite's report module, when it has one: ``markdown(records) -> list[str]`` and
    #: ``html(records, add_chart) -> str`` (the default :meth:`markdown` and :meth:`html`).
    report: ClassVar[ModuleType | None] = None
    #: Whether its sections stand at the top of the report (else, one section in the group of
    #: further suites).
    own_sections: ClassVar[bool] = False

    def defaults(self) -> Options:
        return {o.name: o.default for o in self.options}

    def option_names(self) -> Sequence[str]:
        return [o.name for o in self.options]

    def options_from_json(self, raw: dict[str, Any]) -> Options:
        """Option values as ``results.json`` records them (missing ones take their default)."""
        return {o.name: o.from_json(raw[o.name]) if o.name in raw else o.default for o in self.options}

    def requires(self, engine: type[Engine], info: EngineInfo) -> str | None:
        """Why ``engine`` cannot take part in this suite, or ``None`` when it can. The default:
        the reason its ``engine.toml`` gives under the suite's name, if any."""
        return info.unsupported.get(self.name)

    def refusal(self, engine: type[Engine], info: EngineInfo) -> str | None:
        """What the runner and the support matrix ask: why ``engine`` cannot take part, or
        ``None``. An engine that does not serve the suite's :attr:`dataset_kind` (its
        ``engine.toml``'s ``kinds``, where :attr:`kind_served`) gives the reason its
        ``[unsupported]`` names under the suite's name, or a generic one; otherwise
        :meth:`requires` answers."""
        if self.kind_served and self.dataset_kind not in info.kinds:
            return info.unsupported.get(self.name, f"does not serve the {self.dataset_kind} dataset (engine.toml's "
                                                   f"kinds: {', '.join(info.kinds)})")
        return self.requires(engine, info)

    @abstractmethod
    def cell_ids(self, opts: Options, engine: type[Engine]) -> list[str]:
        """Every benchmark id the suite records for ``engine`` under ``opts``, in run order."""

    def category(self, benchmark: str) -> str:
        """The record's category (the reference paper's grouping for the published suite)."""
        return self.name

    @abstractmethod
    def run(self, ctx: CellContext, todo: list[str]) -> None:
        """Record every cell of ``todo`` for the context's engine (``ctx.record`` each one)."""

    def support(self, engine: type[Engine], info: EngineInfo) -> str:
        """The engine's cell in the generated support matrix."""
        reason = self.refusal(engine, info)
        return f"— {reason}" if reason else "✔"

    # -- reports --------------------------------------------------------------------------

    def report_html(self, view: SuiteView) -> PageParts[list[Section]]:
        """The suite's HTML: by default one section, :meth:`html` of its records."""
        body = self.html(view.records, view.add or _no_chart)
        return PageParts([Section(f"beyond-{self.name}", self.title, body)], [], [])

    def report_markdown(self, view: SuiteView) -> PageParts[list[str]]:
        """The suite's Markdown: by default :meth:`markdown` of its records (the shell titles it)."""
        return PageParts(self.markdown(view.records), [], [])

    def markdown(self, records: list[Record]) -> list[str]:
        """The suite's Markdown section body in ``report.md`` (the shell adds the title)."""
        return list(self.report.markdown(records)) if self.report is not None else []

    def html(self, records: list[Record], add_chart: AddChart) -> str:
        """The suite's HTML section body in ``report.html`` (tables and charts)."""
        return str(self.report.html(records, add_chart)) if self.report is not None else ""

    def headline(self, record: Record) -> str:
        """The one figure that sums up an ok cell in the terminal table."""
        return ""

    def cell_text(self, record: Record) -> str:
        """A cell's text in a matrix of benchmarks × engines: its status, or its timing, or its
        headline figure."""
        if record.status == "ok" and record.stats is None:
            return self.headline(record) or "✔"
        return cell_text(record)

    def measures(self, record: Record) -> list[Measure]:
        """What ``tickbench compare`` compares of a cell: by default its timed repetitions."""
        return timing_measures(record)

    def dataset_notes(self, universe: int) -> list[str]:
        """What a run of this suite with its default options will record as not applicable on a
        dataset of its kind with ``universe`` instruments, one line each, for ``generate``,
        ``import`` and ``validate`` to say (a note, not a refusal); by default nothing."""
        return []


def _no_chart(div_id: str, data: list[dict[str, Any]], layout: dict[str, Any]) -> str:
    return ""
