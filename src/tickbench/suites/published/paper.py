"""The reference paper's published figures (``paper_figures.toml``) and how our rank order compares.

The paper's numbers were measured on another machine, on other data and with a cold cache
(see the ``[paper]`` table of the data file): the reports show them only as a separate, labelled
series and compare *rank orders* of the engines present in both, never the values themselves.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from tickbench.suites.published import BENCHMARKS

PAPER_LABEL = "paper (their machine, their data)"


@dataclass(frozen=True)
class Paper:
    """The transcribed figures: per benchmark id, the paper's value per system."""

    citation: str
    machine: str
    dataset: str
    protocol: str
    systems: tuple[str, ...]  # in the paper's column order
    engine_of: dict[str, str]  # paper system -> tickbench engine ("" when none)
    values: dict[str, dict[str, float]]  # benchmark id -> system -> value
    units: dict[str, str]  # benchmark id -> unit of ``values``
    table_of: dict[str, str]  # benchmark id -> the paper's table number
    memory_mb: dict[str, dict[str, float]]  # table 9: benchmark id -> system -> "query storage" MB
    kdb_csv_mb_per_s: float

    def system_of(self, engine: str) -> str | None:
        """The paper system that ``engine`` corresponds to, if any."""
        for system, e in self.engine_of.items():
            if e and e == engine:
                return system
        return None

    def label(self, system: str) -> str:
        """The system's name with its tickbench counterpart, e.g. ``ClickHouse (≙ chdb)``."""
        engine = self.engine_of.get(system, "")
        return f"{system} (≙ {engine})" if engine else system


@cache
def load() -> Paper:
    """Read ``paper_figures.toml`` from the package."""
    raw: dict[str, Any] = tomllib.loads(
        resources.files("tickbench.suites.published").joinpath("paper_figures.toml").read_text(encoding="utf-8"))
    systems = tuple(s["name"] for s in raw["systems"])
    engine_of = {s["name"]: s["engine"] for s in raw["systems"]}
    values: dict[str, dict[str, float]] = {}
    units: dict[str, str] = {}
    table_of: dict[str, str] = {}
    memory: dict[str, dict[str, float]] = {}
    for number, table in raw["tables"].items():
        for key, row in table.items():
            if not isinstance(row, dict):
                continue
            if number == "9":
                memory[key] = {k: float(v) for k, v in row.items()}
                continue
            values[key] = {k: float(v) for k, v in row.items()}
            units[key] = table.get(f"unit_{key}", table.get("unit", ""))
            table_of[key] = number
    p = raw["paper"]
    return Paper(citation=p["citation"], machine=p["machine"], dataset=p["dataset"], protocol=p["protocol"],
                 systems=systems, engine_of=engine_of, values=values, units=units, table_of=table_of,
                 memory_mb=memory, kdb_csv_mb_per_s=float(raw["tables"]["5"]["W_kdb_mb_per_s"]))


@dataclass(frozen=True)
class RankRow:
    """One benchmark's rank order in the paper and in our run, over the engines in both."""

    benchmark: str
    paper_order: list[str]  # tickbench engine names, best first, by the paper's figures
    our_order: list[str]  # the same engines, best first, by our figures
    concordant: int  # engine pairs in the same order in both
    pairs: int

    @property
    def agrees(self) -> bool:
        return self.paper_order == self.our_order


def rank_rows(ours: dict[str, dict[str, float]]) -> list[RankRow]:
    """Compare rank orders per benchmark; ``ours`` maps benchmark -> engine -> our figure
    (lower is better, as in every figure of the paper). Only engines with a figure on both
    sides count; benchmarks with fewer than two such engines are left out."""
    paper = load()
    rows: list[RankRow] = []
    for b in BENCHMARKS:
        theirs = paper.values.get(b.id, {})
        mine = ours.get(b.id, {})
        both = {paper.engine_of[s]: v for s, v in theirs.items()
                if paper.engine_of.get(s) and paper.engine_of[s] in mine}
        if len(both) < 2:
            continue
        paper_order = sorted(both, key=lambda e: both[e])
        our_order = sorted(both, key=lambda e: mine[e])
        pos = {e: i for i, e in enumerate(our_order)}
        pairs = concordant = 0
        for i, e1 in enumerate(paper_order):
            for e2 in paper_order[i + 1:]:
                pairs += 1
                concordant += pos[e1] < pos[e2]
        rows.append(RankRow(b.id, paper_order, our_order, concordant, pairs))
    return rows
