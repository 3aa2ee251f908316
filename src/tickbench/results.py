"""The versioned result schema: ``results.json`` (pydantic models).

One :class:`Results` per run: the environment, the dataset, the parameters, and one
:class:`Record` per (engine, benchmark) with its suite, raw samples, summary statistics,
verdict, memory figure, the exact query text that ran, and the suite's figures. Each suite
declares the typed model of its figures (``figures_model`` in ``suites/<name>/suite.py``); a
record's figures are checked against it when the record is made and when results are read.

``schema_version`` changes whenever a field changes meaning. Version 2 added ``suite`` to each
record, the typed figures and ``config["options"]`` (per suite); version 1 files are migrated
on read (:func:`migrate_v1`), any other version is refused.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

SCHEMA_VERSION = 2
PROTOCOL_VERSION = "1"  # the timing protocol (warm-up, repetitions, clocks); see METHODOLOGY.md

Status = Literal["ok", "wrong", "timeout", "error", "unsupported", "not_applicable", "unavailable"]


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
    suite: str = "published"  # the suite the benchmark belongs to (v2)
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

    @model_validator(mode="before")
    @classmethod
    def _suite_from_id(cls, data: Any) -> Any:
        """A record made without ``suite`` belongs to the suite its benchmark id names."""
        if isinstance(data, dict) and "suite" not in data and "benchmark" in data:
            data = {**data, "suite": suite_of(str(data["benchmark"]))}
        return data

    @model_validator(mode="after")
    def _typed_figures(self) -> Record:
        """Check the figures against the suite's model (a suite this tickbench does not know
        keeps its figures as they are)."""
        if self.figures:
            model = _figures_model(self.suite)
            if model is not None:
                model.model_validate(self.figures)
        return self


class Environment(BaseModel):
    cpu: str
    cores: int
    memory_bytes: int
    os: str
    python: str
    tickbench_version: str
    engines: dict[str, dict[str, Any]] = Field(default_factory=dict)  # name -> version, settings, peak RSS
    runner_peak_rss_bytes: int | None = None  # the tickbench process itself (reference answers, reports)


class Dataset(BaseModel):
    root: str
    content_hash: str
    scale: float
    seed: int
    symbols: int
    source: str
    generator_version: str


class Results(BaseModel):
    schema_version: int = SCHEMA_VERSION
    protocol_version: str = PROTOCOL_VERSION
    run_id: str
    created: str
    suite: str
    seed: int
    repetitions: int
    timeout_s: float
    dataset: Dataset
    params: dict[str, Any]
    environment: Environment
    config: dict[str, Any] = Field(default_factory=dict)  # what `--resume` needs to continue
    records: list[Record] = Field(default_factory=list)

    def record(self, engine: str, benchmark: str) -> Record | None:
        for r in self.records:
            if r.engine == engine and r.benchmark == benchmark:
                return r
        return None

    def engines(self) -> list[str]:
        return list(dict.fromkeys(r.engine for r in self.records))

    def write(self, path: Path) -> None:
        """Write atomically: a reader never sees a half-written file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".results-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(self.model_dump_json(indent=1))
        os.replace(tmp, path)


class ResultsError(Exception):
    """A results file that cannot be read or is of another schema version."""


def read_results(path: Path) -> Results:
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{path}: not a readable results file ({exc})") from exc
    version = raw.get("schema_version") if isinstance(raw, dict) else None
    try:
        if version == 1:
            raw = migrate_v1(raw)
            version = SCHEMA_VERSION
        if version != SCHEMA_VERSION:
            raise ResultsError(
                f"{path}: results schema version {version!r}, this tickbench reads {SCHEMA_VERSION}; "
                "re-run the benchmark or use the tickbench version that wrote it"
            )
        return Results.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ResultsError(f"{path}: not a valid results file: {where}: {' '.join(first['msg'].split())} "
                           f"({exc.error_count()} error(s) in all); it was edited or is damaged") from None
    except (TypeError, AttributeError, KeyError) as exc:  # a v1 file whose records are not records
        raise ResultsError(f"{path}: not a valid results file ({type(exc).__name__}: {exc})") from None


def _figures_model(suite: str) -> type[BaseModel] | None:
    # Imported here: the suites import this module, and their registry is only needed once a
    # record with figures is checked.
    from tickbench.suites.registry import suites

    known = suites().get(suite)
    return known.figures_model if known is not None else None


def suite_of(benchmark: str) -> str:
    """The suite a benchmark id belongs to: ``suite/...``; the published suite's ids have no ``/``."""
    return benchmark.split("/", 1)[0] if "/" in benchmark else "published"


def migrate_v1(raw: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 results file as schema 2: each record gets its ``suite`` (the first part of
    a ``suite/...`` id; the published suite's ids have none), and the run's
    ``config["beyond"]`` options become ``config["options"]`` by suite."""
    from tickbench.suites.registry import suites

    out = {**raw, "schema_version": SCHEMA_VERSION}
    out["records"] = [{**r, "suite": suite_of(r["benchmark"])} for r in raw.get("records", [])]
    config = dict(raw.get("config") or {})
    beyond = config.pop("beyond", None)
    if beyond is not None:
        config["options"] = {name: {o.name: beyond[o.name] for o in s.options if o.name in beyond}
                             for name, s in suites().items()}
    out["config"] = config
    return out
