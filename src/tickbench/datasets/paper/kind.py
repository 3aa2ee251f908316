"""The paper dataset (``--dataset paper``, SPEC §1): the reference paper's trades and 20-level book
of three instruments (and ``--symbols N`` synthetic ones) on five venues over a month, one
partition per (table, day, exchange, sym); what the published suite and the suites beyond it run on.

Layout of its directory::

    manifest.json
    trades/<day>/<E>__<S>.parquet   (zstd, rows in time order)
    book/<day>/<E>__<S>.parquet
    csv/trades_<bulk day>.csv       (the bulk-load day, all instruments, time order)
    csv/book_<bulk day>.csv

(``<E>`` and ``<S>``: :func:`tickbench.data.dataset.file_name` of the exchange and the instrument.)
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from tickbench import __version__, verify
from tickbench.data.dataset import (
    GENERATOR_VERSION,
    MANIFEST,
    Dataset,
    DatasetError,
    Manifest,
    ProgressFn,
    combine_hashes,
    csv_path,
    csv_size,
    hash_table,
    partition_path,
    run_tasks,
)
from tickbench.data.derive import derive_params
from tickbench.data.violations import ValidationReport
from tickbench.datasets.base import DatasetKind, KindSpec, RunParams
from tickbench.datasets.paper import calendar as cal
from tickbench.datasets.paper import reference
from tickbench.datasets.paper.generator import generate_partition
from tickbench.datasets.paper.params import QueryParams, SpanParams, query_params
from tickbench.datasets.paper.schema import SCHEMAS, TABLES
from tickbench.datasets.paper.spec import QUERIES, QUERY_IDS
from tickbench.datasets.paper.validate import validate_paper

MAX_SYMBOLS = 10_000


if TYPE_CHECKING:
    from tickbench.data.importers import ImportResult
    from tickbench.data.importers.common import ReaderOptions

def default_params() -> dict[str, Any]:
    """The benchmark parameters of SPEC §2 for the generated calendar."""
    month = cal.month_days()
    return {
        "day": cal.MONTH_START.isoformat(),
        "week": [month[0].isoformat(), month[6].isoformat()],
        "month": [month[0].isoformat(), month[-1].isoformat()],
        "symbol": "BTC-USD",
        "multi_day": cal.MULTI_DAY.isoformat(),
        "bulk_day": cal.BULK_DAY.isoformat(),
    }


def gen_task(args: tuple[int, cal.Partition, int, str]) -> dict[str, Any]:
    """Generate and write one partition into the staging directory ``out`` (run in a worker
    process, or a cluster worker that sees ``out`` on a shared filesystem)."""
    seed, part, symbols, out = args
    if not Path(out).is_dir():
        raise DatasetError(f"worker {socket.gethostname()}: cannot see the output directory {out}; "
                           "with --cluster, --out must be on a filesystem every worker mounts at the same path")
    data = generate_partition(seed, part, cal.instrument(part.sym, symbols))
    rows = []
    for table in TABLES:
        t = getattr(data, table)
        rel = partition_path(table, part.day, part.exchange, part.sym)
        dest = Path(out) / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(t, dest, compression="zstd", use_dictionary=["exchange", "sym", "side"])
        rows.append({
            "table": table, "day": part.day.isoformat(), "exchange": part.exchange,
            "sym": part.sym, "path": rel, "rows": t.num_rows, "bytes": dest.stat().st_size,
            "csv_bytes": csv_size(t), "hash": hash_table(t),
        })
    return {"rows": rows, "generator_version": GENERATOR_VERSION, "tickbench_version": __version__}


def _bulk_rels(parts: Iterable[cal.Partition], table: str) -> list[str]:
    return sorted(partition_path(table, p.day, p.exchange, p.sym) for p in parts if p.day == cal.BULK_DAY)


class PaperKind:
    """The paper dataset (SPEC §1)."""

    name = "paper"
    title = "the reference paper's three instruments (SPEC §1.1)"
    schemas: Mapping[str, pa.Schema] = SCHEMAS
    tables: tuple[str, ...] = TABLES
    options: tuple[str, ...] = ("symbols",)
    generator_version = GENERATOR_VERSION
    spec = KindSpec(queries=QUERY_IDS, columns={q.id: q.columns for q in QUERIES},
                    sort={q.id: q.sort_by for q in QUERIES}, rel_tol=verify.REL_TOL, abs_floor=verify.ABS_FLOOR)

    def check_options(self, symbols: int, universe: int | None) -> tuple[int, int | None]:
        if universe is not None:
            raise DatasetError("--universe applies to --dataset market; the paper dataset's extra instruments "
                               "are --symbols N")
        if symbols < 0 or symbols > MAX_SYMBOLS:
            raise DatasetError(f"--symbols {symbols}: must be in [0, {MAX_SYMBOLS}]")
        return symbols, None

    def default_dir(self, scale: float, seed: int, symbols: int, universe: int | None) -> Path:
        return Path("data") / (f"sf{scale:g}-seed{seed}" + (f"-sym{symbols}" if symbols else ""))

    def describe(self, manifest: Manifest) -> str:
        rows_all = sum(p["rows"] for p in manifest.partitions)
        return f"{rows_all:,} rows, scale {manifest.scale:g}, seed {manifest.seed}"

    def size_text(self, manifest: Manifest) -> str:
        return f"symbols {manifest.symbols}"

    def generate_into(self, stage: Path, scale: float, seed: int, symbols: int, universe: int | None, jobs: int,
                      progress: ProgressFn | None, cluster: str | None) -> Manifest:
        parts = sorted(cal.partitions(scale, symbols), key=lambda p: -(p.trades + p.book))
        tasks = [(seed, p, symbols, str(stage)) for p in parts]
        csv_tasks = [(str(stage), table, _bulk_rels(parts, table), csv_path(table, cal.BULK_DAY))
                     for table in TABLES]
        rows, csv_info = run_tasks(
            stage, gen_task, tasks, lambda t: t[1].day == cal.BULK_DAY, csv_tasks, GENERATOR_VERSION,
            jobs, progress, cluster)
        manifest = Manifest(
            scale=scale, seed=seed, symbols=symbols,
            content_hash=combine_hashes({r["path"]: r["hash"] for r in rows}),
            partitions=rows, csv=csv_info, params=default_params(),
        )
        (stage / MANIFEST).write_text(manifest.to_json())
        return manifest

    def check_manifest(self, where: Path, m: Manifest, fix: str) -> None:
        """A paper manifest's entries are checked by the shared layout (one partition per table,
        day, exchange, sym): nothing of its own to add."""

    def expected_params(self, m: Manifest) -> dict[str, Any]:
        """The generated calendar's parameters (SPEC §2), or those derived from an import's partitions."""
        if m.source == "generated":
            return default_params()
        if not m.partitions:
            raise DatasetError("an imported dataset without partitions; re-import it")
        return derive_params(m.partitions)

    def content_check(self, directory: Path, m: Manifest) -> None:
        """Nothing beyond the content hash needs the rows."""
        return None

    def validate(self, directory: Path, manifest: Manifest, max_samples: int) -> ValidationReport:
        return validate_paper(directory, manifest, max_samples)

    def params(self, dataset: Dataset, seed: int) -> RunParams:
        return query_params(dataset.params, seed)

    def params_from_dict(self, raw: dict[str, Any]) -> RunParams:
        """:class:`QueryParams` (or :class:`SpanParams`) from ``as_dict()``."""
        common = dict(day=raw["day"], week=tuple(raw["week"]), month=tuple(raw["month"]),
                      symbol=raw["symbol"], multi_day=raw["multi_day"],
                      ot_times=tuple(raw["ot_times"]), nbbo_times=tuple(raw["nbbo_times"]))
        if raw.get("span_days"):
            return SpanParams(**common, span_days=tuple(raw["span_days"]))
        return QueryParams(**common)

    def answer(self, qid: str, dataset: Dataset, params: RunParams) -> pl.DataFrame:
        assert isinstance(params, QueryParams)
        return reference.answer(qid, dataset, params)


    def import_into(self, fmt: str, paths: list[Path], out: Path, stage: Path, opts: ReaderOptions, limit: int,
                    sample: int | None, trade_ids: str) -> ImportResult:
        from tickbench.datasets.paper.importer import write_paper  # the importers load only for an import

        return write_paper(fmt, paths, out, stage, opts, limit, sample, trade_ids)


KIND: DatasetKind = PaperKind()
