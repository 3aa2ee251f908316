"""The versioned result schema: ``results.json`` (pydantic models).

One :class:`Results` per run: the environment, the dataset, the parameters, the run's
settings (what ``--resume`` needs), and one :class:`Record` per (engine, benchmark) with its
suite, raw samples, summary statistics, verdict, memory figure, the exact query text that ran,
and the suite's figures.

This module is the bottom layer: it knows no suite. Each suite declares the typed model of its
figures (``figures_model`` in ``suites/<name>/suite.py``); the runner checks a record's figures
against it when the record is made, and :func:`tickbench.suites.registry.read_results` when a
file is read for a report or a comparison.

``schema_version`` changes whenever a field changes meaning. Version 2 added ``suite`` to each
record, the typed figures and ``config["options"]`` (per suite); version 1 files are migrated
on read (:func:`migrate_v1`, given which suite owns each option), any other version is refused.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SCHEMA_VERSION = 2
#: The timing protocol (warm-up, repetitions, clocks); see METHODOLOGY.md. 2: a query's warm-up
#: runs up to ``warmup`` times within ``warmup_s`` seconds (1: once).
PROTOCOL_VERSION = "2"

Status = Literal["ok", "wrong", "timeout", "error", "unsupported", "not_applicable", "unavailable", "interrupted"]


class Stats(BaseModel):
    """Summary of the timed repetitions, in milliseconds."""

    n: int
    median_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float

    @classmethod
    def of(cls, samples_ns: list[int]) -> Stats:
        ms = [s / 1e6 for s in samples_ns]
        return cls(
            n=len(ms),
            median_ms=statistics.median(ms),
            mean_ms=statistics.fmean(ms),
            std_ms=statistics.stdev(ms) if len(ms) > 1 else 0.0,
            min_ms=min(ms),
            max_ms=max(ms),
        )


def harness_share_ms(samples_ns: list[int], server_ns: list[int]) -> float | None:
    """The harness share of timed repetitions (what the client waited beyond the engine's own
    time: the result's transport and the client), in ms: the median over the repetitions of each
    one's client time less the engine's own time of the same repetition, so a repetition that is
    slow on both sides (the engine's warm-up, a pause) does not count as transport; the median
    client time less the median engine time where the engine timed only some repetitions;
    ``None`` where it timed none."""
    if not server_ns:
        return None
    if len(server_ns) == len(samples_ns):
        return float(statistics.median(c - s for c, s in zip(samples_ns, server_ns, strict=True))) / 1e6
    return float(statistics.median(samples_ns) - statistics.median(server_ns)) / 1e6


class Memory(BaseModel):
    """Memory a query used and how it was measured (``kind``)."""

    bytes: int
    kind: str


class QueryText(BaseModel):
    file: str
    sha256: str
    text: str


class Record(BaseModel):
    """The outcome of one benchmark on one engine."""

    engine: str
    benchmark: str
    suite: str  # the suite the benchmark belongs to (v2)
    category: str
    status: Status
    reason: str = ""
    verified: bool | None = None
    mode: str = "warm"  # "warm" or "cold"
    cold_note: str = ""
    samples_ns: list[int] = Field(default_factory=list)
    #: The engine's own execution time of each timed repetition, where it reports one
    #: (SPEC §3: server-side time kept beside the client-side ``samples_ns``).
    server_samples_ns: list[int] = Field(default_factory=list)
    stats: Stats | None = None
    memory: Memory | None = None
    rows: int | None = None
    query: QueryText | None = None
    figures: dict[str, Any] = Field(default_factory=dict)  # the suite's figures, per its figures_model
    notes: str = ""
    #: The engine's plan of the query (its EXPLAIN), taken after the timed repetitions; empty
    #: where the engine has none (see Engine.explain).
    plan: str = ""


class Environment(BaseModel):
    cpu: str
    cores: int
    memory_bytes: int
    os: str
    python: str
    tickbench_version: str
    engines: dict[str, dict[str, Any]] = Field(default_factory=dict)  # name -> version, settings, peak RSS
    runner_peak_rss_bytes: int | None = None  # the tickbench process itself (reference answers, reports)


class DatasetInfo(BaseModel):
    """The dataset a run used, as its results record it."""

    root: str
    content_hash: str
    scale: float
    seed: int
    symbols: int
    source: str
    generator_version: str


class RunSettings(BaseModel):
    """How a run was asked for: everything ``tickbench run --resume`` needs to continue it.

    ``options`` holds every suite's option values by suite, then by option name, in their JSON
    form; ``endpoints`` the external servers by engine (never credentials)."""

    model_config = ConfigDict(extra="forbid")
    engines: list[str]
    data: str
    seed: int
    suite: str
    repetitions: int
    warmup: int
    #: The warm-up's seconds (protocol 2); ``None`` in the files of protocol 1, whose warm-up
    #: was ``warmup`` runs (one).
    warmup_s: float | None = None
    timeout_s: float
    load_timeout_s: float
    load_repetitions: int
    cold: bool
    save_answers: bool
    cell_budget_s: float = 60.0
    options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    endpoints: dict[str, dict[str, Any]] = Field(default_factory=dict)


class Results(BaseModel):
    schema_version: int = SCHEMA_VERSION
    protocol_version: str = PROTOCOL_VERSION
    run_id: str
    created: str
    suite: str
    seed: int
    repetitions: int
    timeout_s: float
    dataset: DatasetInfo
    params: dict[str, Any]
    environment: Environment
    config: RunSettings | None = None  # what `--resume` needs to continue
    records: list[Record] = Field(default_factory=list)

    def record(self, engine: str, benchmark: str) -> Record | None:
        for r in self.records:
            if r.engine == engine and r.benchmark == benchmark:
                return r
        return None

    def engines(self) -> list[str]:
        return list(dict.fromkeys(r.engine for r in self.records))

    def protocol_text(self) -> str:
        """The timed repetitions and their warm-up, in words, e.g. "5 timed repetitions after
        up to 10 warm-up runs (1 s at most)"; "after a warm-up" where the file records none
        of protocol 2."""
        warm = "a warm-up"
        c = self.config
        if c is not None and c.warmup_s is not None:
            warm = f"up to {c.warmup} warm-up runs ({c.warmup_s:g} s at most)" if c.warmup > 1 else "a warm-up"
        return f"{self.repetitions} timed repetitions after {warm}"

    def unavailable(self) -> dict[str, str]:
        """The engines not available here (every cell ``unavailable``, e.g. kdb+ without a
        licence), each with why: a line under a table, not a column of reasons."""
        out: dict[str, str] = {}
        for e in self.engines():
            recs = [r for r in self.records if r.engine == e]
            if all(r.status == "unavailable" for r in recs):
                out[e] = recs[0].reason.removeprefix("not available: ")
        return out

    def write(self, path: Path) -> None:
        """Write atomically: a reader never sees a half-written file, and a write that fails
        (a full disk) leaves the previous file as it was and no temporary file behind."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(self.model_dump_json(indent=1))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class ResultsError(Exception):
    """A results file that cannot be read or is of another schema version."""


@dataclass(frozen=True)
class V1Names:
    """What :func:`migrate_v1` needs to know of the suites, from the layer that knows them:
    the suite of a version-1 benchmark id, and the suite that declares an option (``None``:
    no suite does, and the option is dropped)."""

    suite_of: Callable[[str], str]
    option_owner: Callable[[str], str | None]


def read_results(path: Path, v1: V1Names | None = None) -> Results:
    """The results file at ``path``, migrated from version 1 when it is one and ``v1`` says how
    (refused otherwise). Figures are not checked here: this module knows no suite (see
    :func:`tickbench.suites.registry.read_results`)."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{path}: not a readable results file ({exc})") from exc
    version = raw.get("schema_version") if isinstance(raw, dict) else None
    if version == 1 and v1 is not None:
        raw = migrate_v1(raw, v1)
        version = SCHEMA_VERSION
    if version != SCHEMA_VERSION:
        raise ResultsError(
            f"{path}: results schema version {version}, this tickbench reads {SCHEMA_VERSION}; "
            "re-run the benchmark or use the tickbench version that wrote it"
        )
    try:
        return Results.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ResultsError(f"{path}: not a valid results file: {where}: {first['msg']} "
                           f"({exc.error_count()} problem(s)); re-run the benchmark to write it again") from None


def migrate_v1(raw: dict[str, Any], v1: V1Names) -> dict[str, Any]:
    """A schema-1 results file as schema 2: each record gets its ``suite``, and the run's
    ``config["beyond"]`` options become ``config["options"]`` by the suite that owns each."""
    out = {**raw, "schema_version": SCHEMA_VERSION}
    out["records"] = [{**r, "suite": v1.suite_of(r["benchmark"])} for r in raw.get("records", [])]
    config = dict(raw.get("config") or {})
    beyond = config.pop("beyond", None)
    if beyond is not None:
        options: dict[str, dict[str, Any]] = {}
        for name, value in beyond.items():
            owner = v1.option_owner(name)
            if owner is not None:
                options.setdefault(owner, {})[name] = value
        config["options"] = options
    out["config"] = config or None
    return out
