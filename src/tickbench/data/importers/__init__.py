"""Import real market data into a tickbench dataset (SPEC §1 schema, the generator's layout).

``import_dataset(fmt, paths, out)`` streams the input files through a format reader
(:mod:`.tardis`, :mod:`.cryptofeed`, :mod:`.lobster`; :mod:`.taq` and Tardis ``quotes`` files
make a market dataset instead, SPEC §1.3, written by :mod:`.market`), checks every row with the invariants of
:mod:`tickbench.datasets.paper.validate`, writes the partitions, the bulk-load day's CSV and a manifest
(``source = "import:<format>"``) into a staging directory beside ``out`` and renames it into
place only when complete, as ``generate`` does. The benchmark parameters are derived from the
data (:func:`derive_params`).
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from tickbench.data.dataset import (
    STAGE_OWNER,
    DatasetError,
    Manifest,
    claim_stage,
    combine_hashes,
    dataset_lock,
    remove_abandoned_stages,
)
from tickbench.data.derive import derive_params
from tickbench.data.importers import cryptofeed, lobster, market, taq, tardis
from tickbench.data.importers.common import Chunk, ReaderOptions
from tickbench.data.importers.writer import (
    POLICIES,
    DatasetBuilder,
    ImportFailure,
    missing_id_hint,
    write_bulk_csv,
)
from tickbench.datasets.paper.schema import TABLES

Reader = Callable[[list[Path], ReaderOptions], Iterator[Chunk]]
FORMATS: dict[str, Reader] = {"tardis": tardis.read, "cryptofeed": cryptofeed.read, "lobster": lobster.read,
                              "taq": taq.read}
# Formats (or their files) that make a market dataset, and their readers of market rows.
MARKET_READERS: dict[str, Reader] = {"taq": taq.read, "tardis": tardis.read_market}
CLOCKS = ("exchange", "local")
TRADE_IDS = ("native", "sequence")
DEFAULT_MEMORY_MB = 512
MIN_MEMORY_MB = 16

__all__ = ["CLOCKS", "FORMATS", "POLICIES", "TRADE_IDS", "ImportFailure", "ImportResult", "derive_params",
           "import_dataset"]


@dataclass(frozen=True)
class ImportResult:
    """The written dataset's manifest and the rows dropped per reason (``--policy drop``)."""

    manifest: Manifest
    dropped: dict[str, int]
    rows_read: dict[str, int]


def _coalesce(chunks: Iterator[Chunk], target_bytes: int) -> Iterator[Chunk]:
    """Join consecutive small chunks of one table and file up to ``target_bytes``: the reader's
    blocks are small to bound its memory, the checks cost a fixed overhead per call."""
    held: list[Chunk] = []
    size = 0
    for c in chunks:
        if held and (c.table != held[0].table or c.source != held[0].source or size >= target_bytes):
            yield Chunk(held[0].table, pl.concat([h.df for h in held]), held[0].source)
            held, size = [], 0
        if c.df.height:
            held.append(c)
            size += int(c.df.estimated_size())
    if held:
        yield Chunk(held[0].table, pl.concat([h.df for h in held]), held[0].source)


def _import_market(fmt: str, paths: list[Path], out: Path, stage: Path, opts: ReaderOptions, limit: int,
                   sample: int | None, trade_ids: str) -> ImportResult:
    """A market dataset (SPEC §1.3) from quotes and trades files, into ``stage``, then ``out``."""
    if sample is not None:
        raise DatasetError("--sample: a market dataset keeps every quote (the option samples order books)")
    builder = market.MarketBuilder(stage, opts.policy)
    for chunk in _coalesce(market.chunks_of({"quotes", "trades"}, MARKET_READERS[fmt](paths, opts)), limit // 16):
        builder.add(chunk)
    builder.dropped.update(opts.dropped)  # rows a reader left out itself (TAQ's corrected trades)
    manifest = builder.finish(fmt, {"files": sorted(p.name for p in paths), "policy": opts.policy,
                                    "clock": opts.clock, "trade_ids": trade_ids, **opts.notes})
    shutil.rmtree(stage / ".spill", ignore_errors=True)
    (stage / "manifest.json").write_text(manifest.to_json())
    (stage / STAGE_OWNER).unlink()
    if out.exists():
        out.rmdir()
    os.replace(stage, out)
    return ImportResult(manifest, dict(builder.dropped), dict(builder.rows_in))


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DatasetError(f"--out {out}: exists and is not an empty directory; choose a new one")


def import_dataset(fmt: str, paths: list[Path], out: Path, **options: Any) -> ImportResult:
    """:func:`_import_dataset` holding ``out``'s lock (:func:`~tickbench.data.dataset.dataset_lock`):
    a second import or a generation into the same place is refused, naming the first."""
    with dataset_lock(Path(out), "importing"):
        return _import_dataset(fmt, paths, out, **options)


def _import_dataset(
    fmt: str,
    paths: list[Path],
    out: Path,
    policy: str = "fail",
    sample: int | None = None,
    memory_limit_mb: int = DEFAULT_MEMORY_MB,
    clock: str = "exchange",
    trade_ids: str = "native",
    progress: Callable[[str, int, int], None] | None = None,
) -> ImportResult:
    """Convert ``paths`` (files in format ``fmt``) into a dataset at ``out``; see the module doc.

    Raises :class:`DatasetError` for bad arguments or unreadable input and
    :class:`ImportFailure` (a DatasetError) for the first bad row under ``policy="fail"``; in
    both cases nothing is left at ``out``.
    """
    if fmt not in FORMATS:
        raise DatasetError(f"format {fmt!r}: must be one of {', '.join(FORMATS)}")
    if policy not in POLICIES:
        raise DatasetError(f"--policy {policy}: must be one of {', '.join(POLICIES)}")
    if clock not in CLOCKS:
        raise DatasetError(f"--clock {clock}: must be one of {', '.join(CLOCKS)}")
    if trade_ids not in TRADE_IDS:
        raise DatasetError(f"--trade-ids {trade_ids}: must be one of {', '.join(TRADE_IDS)}")
    if memory_limit_mb < MIN_MEMORY_MB:
        raise DatasetError(f"--memory-limit {memory_limit_mb}: must be at least {MIN_MEMORY_MB} MB")
    if not paths:
        raise DatasetError("no input files given")
    paths = [Path(p) for p in paths]
    for p in paths:
        if not p.is_file():
            raise DatasetError(f"{p}: no such file")
    out = Path(out)
    _check_out(out)
    limit = memory_limit_mb << 20
    # pyarrow's streaming CSV reader holds about 40 blocks' worth of memory (measured: 75 MB of
    # Arrow allocations for 2 MB blocks), and each batch is converted and checked in a few
    # copies: 1/160 of the limit per block keeps reading and checking near a third of the limit,
    # beside the buffered output (a quarter) and the Parquet/CSV writers' row groups
    opts = ReaderOptions(sample=sample, clock=clock, trade_ids=trade_ids, block_bytes=max(limit // 160, 1 << 16),
                   progress=progress, policy=policy)
    is_market = fmt == "taq" or (fmt == "tardis" and tardis.is_market(paths))
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned_stages(out)  # of an import (or generation) into ``out`` that was killed
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        claim_stage(stage)
        if is_market:
            return _import_market(fmt, paths, out, stage, opts, limit, sample, trade_ids)
        builder = DatasetBuilder(stage, policy, limit, hint=missing_id_hint)
        for chunk in _coalesce(FORMATS[fmt](paths, opts), limit // 16):
            builder.add(chunk.table, chunk.df, chunk.source)
        entries = builder.finish()
        builder.dropped.update(opts.dropped)  # book updates the readers dropped themselves
        params = derive_params(entries)
        # Both tables' CSV, a header alone where the bulk-load day has none of a table's rows:
        # W loads both tables from every dataset.
        csv_info = {table: write_bulk_csv(stage, table, params["bulk_day"], entries, max(limit // 16_000, 1024))
                    for table in TABLES}
        manifest = Manifest(
            scale=1.0, seed=0, symbols=0, content_hash=combine_hashes({e["path"]: e["hash"] for e in entries}),
            partitions=entries, csv=csv_info, params=params, source=f"import:{fmt}", generator_version="",
            extra={"import": {
                "format": fmt, "files": sorted(p.name for p in paths), "policy": policy,
                "sample": sample, "clock": clock, "trade_ids": trade_ids,
                "rows_read": dict(builder.rows_in), "dropped": dict(builder.dropped),
                "levels": "20 real levels per side in every row (rows with fewer were reported)",
                **opts.notes,
            }},
        )
        (stage / "manifest.json").write_text(manifest.to_json())
        (stage / STAGE_OWNER).unlink()  # not part of the dataset
        if out.exists():
            out.rmdir()
        os.replace(stage, out)
        return ImportResult(manifest, dict(builder.dropped), dict(builder.rows_in))
    except (OSError, pl.exceptions.PolarsError, pa.ArrowException) as exc:
        if not _disk_full(exc):
            raise
        raise DatasetError(f"--out {out}: the disk under {out.parent} filled up while importing "
                           f"({_free_gb(out.parent)} GB free); nothing was kept. Free space there or choose "
                           "another --out") from exc
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)


def _disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that found no space (an OSError, or Polars' and Arrow's
    wrappers of one, which keep only its text)."""
    return (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or "No space left on device" in str(exc)


def _free_gb(path: Path) -> str:
    try:
        return f"{shutil.disk_usage(path).free / 1e9:.1f}"
    except OSError:
        return "?"
