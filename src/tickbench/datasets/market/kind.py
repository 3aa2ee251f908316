"""The market dataset (``--dataset market``, SPEC §1.3): a universe of instruments (``--universe
N``, default 1,000) quoted on eight venues over 20 trading days; what the market suite runs on.

Layout of its directory::

    manifest.json
    instruments.parquet                      (one row per instrument, by rank)
    quotes/<day>/block-<b>.parquet           (zstd; ranks (4**(b-1), 4**b]; rows by sym, then
    trades/<day>/block-<b>.parquet            ts, exchange, seq / trade_id)
    csv/quotes_<D>.csv, csv/trades_<D>.csv   (day D, every instrument, by ts, sym, exchange, seq)
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tickbench import __version__, verify
from tickbench.data.dataset import (
    MANIFEST,
    Dataset,
    DatasetError,
    Manifest,
    ProgressFn,
    combine_hashes,
    csv_path,
    csv_size,
    hash_table,
    run_tasks,
)
from tickbench.data.violations import ValidationReport
from tickbench.datasets.base import DatasetKind, KindSpec, RunParams
from tickbench.datasets.market import calendar as mc
from tickbench.datasets.market import reference
from tickbench.datasets.market.generator import generate_block
from tickbench.datasets.market.manifest import MARKET_GENERATOR_VERSION, check_market_data, check_market_manifest
from tickbench.datasets.market.params import MARKET as KIND_NAME
from tickbench.datasets.market.params import MarketParams, market_params
from tickbench.datasets.market.schema import INSTRUMENTS_PATH, MARKET_ROW_GROUP, MARKET_SCHEMAS, MARKET_TABLES
from tickbench.datasets.market.validate import validate_market

if TYPE_CHECKING:
    from tickbench.data.importers import ImportResult
    from tickbench.data.importers.common import ReaderOptions

def market_task(args: tuple[int, mc.Block, int, float, str]) -> dict[str, Any]:
    """Generate one block (a day's part file per table) of the market dataset into the staging
    directory ``out`` (a worker process, or a cluster worker that sees ``out``)."""
    seed, block, universe, scale, out = args
    if not Path(out).is_dir():
        raise DatasetError(f"worker {socket.gethostname()}: cannot see the output directory {out}; "
                           "with --cluster, --out must be on a filesystem every worker mounts at the same path")
    data = generate_block(seed, block, universe, scale)
    syms = [mc.sym_of(block.first_rank, universe), mc.sym_of(block.last_rank, universe)]
    rows = []
    for table in MARKET_TABLES:
        t = getattr(data, table)
        rel = block.path(table)
        dest = Path(out) / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(t, dest, compression="zstd", use_dictionary=["exchange", "sym", "side"],
                       row_group_size=MARKET_ROW_GROUP)
        rows.append({
            "table": table, "day": block.day.isoformat(), "block": block.index,
            "ranks": [block.first_rank, block.last_rank], "syms": syms, "path": rel, "rows": t.num_rows,
            "bytes": dest.stat().st_size, "csv_bytes": csv_size(t), "hash": hash_table(t),
        })
    return {"rows": rows, "generator_version": MARKET_GENERATOR_VERSION, "tickbench_version": __version__}


def generate_market_into(
    stage: Path, scale: float, seed: int, universe: int, jobs: int, progress: ProgressFn | None,
    cluster: str | None = None,
) -> Manifest:
    inst = mc.instruments_table(mc.universe_instruments(seed, universe))
    pq.write_table(inst, stage / INSTRUMENTS_PATH, compression="zstd")
    inst_row = {"table": "instruments", "day": None, "path": INSTRUMENTS_PATH, "rows": inst.num_rows,
                "bytes": (stage / INSTRUMENTS_PATH).stat().st_size, "csv_bytes": csv_size(inst),
                "hash": hash_table(inst)}
    blocks = sorted(mc.blocks(universe), key=lambda b: -b.expected_rows(scale))
    tasks = [(seed, b, universe, scale, str(stage)) for b in blocks]
    d = mc.d_day()
    csv_tasks = [(str(stage), table, [b.path(table) for b in sorted(blocks, key=lambda b: b.index) if b.day == d],
                  csv_path(table, d)) for table in MARKET_TABLES]
    rows, csv_info = run_tasks(
        stage, market_task, tasks, lambda t: t[1].day == d, csv_tasks, MARKET_GENERATOR_VERSION,
        jobs, progress, cluster)
    rows = [inst_row, *rows]
    manifest = Manifest(
        scale=scale, seed=seed, symbols=0,
        content_hash=combine_hashes({r["path"]: r["hash"] for r in rows}),
        partitions=rows, csv=csv_info, params=mc.default_params(),
        generator_version=MARKET_GENERATOR_VERSION, kind=KIND_NAME, universe=universe, calendar=mc.calendar_dict(),
    )
    (stage / MANIFEST).write_text(manifest.to_json())
    return manifest


class VenuesSeen:
    """The venues of a market dataset's quotes, gathered as its partitions are read, then held
    against its manifest (:func:`check_market_data`)."""

    def __init__(self, directory: Path, m: Manifest) -> None:
        self.directory, self.m = directory, m
        self.venues: set[str] = set()

    def partition(self, entry: dict[str, Any], rows: pa.Table) -> None:
        if entry["table"] == "quotes":
            self.venues.update(v for v in pc.unique(rows.column("exchange")).to_pylist() if v is not None)

    def done(self) -> None:
        check_market_data(self.directory, self.m, self.venues)


class MarketKind:
    """The market dataset (SPEC §1.3)."""

    name = KIND_NAME
    title = "many instruments quoted on eight venues over 20 trading days (SPEC §1.3)"
    schemas: Mapping[str, pa.Schema] = MARKET_SCHEMAS
    tables: tuple[str, ...] = MARKET_TABLES
    options: tuple[str, ...] = ("universe",)
    generator_version = MARKET_GENERATOR_VERSION
    spec = KindSpec(queries=reference.QUERIES, columns=reference.COLUMNS, sort=reference.SORT,
                    rel_tol=verify.REL_TOL, abs_floor=verify.ABS_FLOOR)

    def check_options(self, symbols: int, universe: int | None) -> tuple[int, int | None]:
        if symbols:
            raise DatasetError("--symbols applies to --dataset paper; the market dataset's size is --universe N")
        if universe is not None and not mc.MIN_UNIVERSE <= universe <= mc.MAX_UNIVERSE:
            raise DatasetError(f"--universe {universe}: must be in [{mc.MIN_UNIVERSE}, {mc.MAX_UNIVERSE:,}]")
        return 0, mc.DEFAULT_UNIVERSE if universe is None else universe

    def default_dir(self, scale: float, seed: int, symbols: int, universe: int | None) -> Path:
        return Path("data") / f"market-sf{scale:g}-u{universe or mc.DEFAULT_UNIVERSE}-seed{seed}"

    def describe(self, manifest: Manifest) -> str:
        rows = {t: sum(p["rows"] for p in manifest.partitions if p["table"] == t) for t in MARKET_TABLES}
        return (f"market, {manifest.universe or 0:,} instruments, {rows['quotes']:,} quotes, {rows['trades']:,} "
                f"trades, scale {manifest.scale:g}, seed {manifest.seed}")

    def size_text(self, manifest: Manifest) -> str:
        return f"universe {manifest.universe}"

    def generate_into(self, stage: Path, scale: float, seed: int, symbols: int, universe: int | None, jobs: int,
                      progress: ProgressFn | None, cluster: str | None) -> Manifest:
        assert universe is not None  # check_options fills in the default
        return generate_market_into(stage, scale, seed, universe, jobs, progress, cluster)

    def check_manifest(self, where: Path, m: Manifest, fix: str) -> None:
        check_market_manifest(where, m, fix)

    def expected_params(self, m: Manifest) -> dict[str, Any]:
        """The generated calendar's parameters (SPEC §2.3), or those of an import's own calendar."""
        if m.source == "generated":
            return dict(mc.default_params())
        try:
            return dict(mc.params_of(mc.calendar_of(m.calendar)))
        except ValueError as exc:
            raise DatasetError(f"an imported market dataset's calendar: {exc}; re-import it") from None

    def content_check(self, directory: Path, m: Manifest) -> VenuesSeen:
        return VenuesSeen(directory, m)

    def validate(self, directory: Path, manifest: Manifest, max_samples: int) -> ValidationReport:
        return validate_market(directory, manifest, ValidationReport(str(directory), max_samples=max_samples))

    def params(self, dataset: Dataset, seed: int) -> RunParams:
        """User 0's parameters (each further user's: :func:`tickbench.datasets.market.params.user_params`)."""
        return market_params(dataset, seed)

    def params_from_dict(self, raw: dict[str, Any]) -> RunParams:
        return MarketParams.from_json(raw, int(raw.get("user", 0)))

    def answer(self, qid: str, dataset: Dataset, params: RunParams) -> pl.DataFrame:
        assert isinstance(params, MarketParams)
        return reference.answer(qid, dataset, params)


    def import_into(self, fmt: str, paths: list[Path], out: Path, stage: Path, opts: ReaderOptions, limit: int,
                    sample: int | None, trade_ids: str) -> ImportResult:
        from tickbench.datasets.market.importer import write_market  # the importers load only for an import

        return write_market(fmt, paths, out, stage, opts, limit, sample, trade_ids)


KIND: DatasetKind = MarketKind()
