"""The versioned result schema: ``results.json`` (pydantic models).

One :class:`Results` per run: the environment, the dataset, the parameters, and one
:class:`Record` per (engine, benchmark) with its raw samples, summary statistics, verdict,
memory figure and the exact query text that ran. ``schema_version`` changes whenever a field
changes meaning; readers refuse other versions.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1
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
    category: str
    status: Status
    reason: str = ""
    verified: bool | None = None
    mode: str = "warm"  # "warm" or "cold"
    cold_note: str = ""
    samples_ns: list[int] = Field(default_factory=list)
    server_samples_ns: list[int] = Field(default_factory=list)
    stats: Stats | None = None
    memory: Memory | None = None
    rows: int | None = None
    query: QueryText | None = None
    figures: dict[str, Any] = Field(default_factory=dict)  # W and SE figures
    notes: str = ""


class Environment(BaseModel):
    cpu: str
    cores: int
    memory_bytes: int
    os: str
    python: str
    tickbench_version: str
    engines: dict[str, dict[str, Any]] = Field(default_factory=dict)  # name -> version, settings


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
    except (OSError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{path}: not a readable results file ({exc})") from exc
    version = raw.get("schema_version") if isinstance(raw, dict) else None
    if version != SCHEMA_VERSION:
        raise ResultsError(
            f"{path}: results schema version {version}, this tickbench reads {SCHEMA_VERSION}; "
            "re-run the benchmark or use the tickbench version that wrote it"
        )
    return Results.model_validate(raw)
