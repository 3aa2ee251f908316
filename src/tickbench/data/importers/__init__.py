"""Import real market data into a tickbench dataset (SPEC §1 schema, the generator's layout).

Each format's reader (:mod:`.tardis`, :mod:`.cryptofeed`, :mod:`.lobster`, :mod:`.taq`) reads
its files as rows and says which dataset kind they make (its ``produces``: a name, e.g. TAQ's and
Tardis ``quotes`` files make the market's, SPEC §1.3); :func:`produced_kind` asks it. The kind
writes them (:meth:`tickbench.datasets.base.DatasetKind.import_into`, chosen by
:func:`tickbench.datasets.base.import_dataset`): it checks every row with its invariants, writes
the partitions, the bulk-load day's CSV and a manifest (``source = "import:<format>"``) into the
staging directory :func:`import_dataset` makes beside ``out``, which is renamed into place only
when complete (:func:`finish_stage`), as ``generate`` does.
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from tickbench.data.dataset import (
    DatasetError,
    Manifest,
    claim_stage,
    dataset_lock,
    publish_stage,
    remove_abandoned_stages,
)
from tickbench.data.derive import derive_params
from tickbench.data.importers import cryptofeed, lobster, taq, tardis
from tickbench.data.importers.common import Chunk, ReaderOptions
from tickbench.data.importers.writer import POLICIES, ImportFailure

Reader = Callable[[list[Path], ReaderOptions], Iterator[Chunk]]
FORMATS: dict[str, Reader] = {"tardis": tardis.read, "cryptofeed": cryptofeed.read, "lobster": lobster.read,
                              "taq": taq.read}
# The formats whose files can make a market dataset, and their readers of market rows.
MARKET_READERS: dict[str, Reader] = {"taq": taq.read, "tardis": tardis.read_market}
#: Each format's declaration of the dataset kind its files make (a kind's name).
PRODUCES: dict[str, Callable[[list[Path]], str]] = {
    "tardis": tardis.produces, "cryptofeed": cryptofeed.produces, "lobster": lobster.produces, "taq": taq.produces}
CLOCKS = ("exchange", "local")
TRADE_IDS = ("native", "sequence")
DEFAULT_MEMORY_MB = 512
MIN_MEMORY_MB = 16

__all__ = ["CLOCKS", "FORMATS", "POLICIES", "TRADE_IDS", "ImportFailure", "ImportResult", "ImportWriter",
           "derive_params", "import_dataset", "produced_kind"]


@dataclass(frozen=True)
class ImportResult:
    """The written dataset's manifest and the rows dropped per reason (``--policy drop``)."""

    manifest: Manifest
    dropped: dict[str, int]
    rows_read: dict[str, int]


#: A dataset kind's writer of imported rows (:meth:`tickbench.datasets.base.DatasetKind.import_into`):
#: ``(fmt, paths, out, stage, opts, limit, sample, trade_ids)``; it reads ``paths`` with ``fmt``'s
#: reader, writes the dataset into ``stage`` and ends with :func:`finish_stage`.
ImportWriter = Callable[[str, list[Path], Path, Path, ReaderOptions, int, int | None, str], ImportResult]


def coalesce(chunks: Iterator[Chunk], target_bytes: int) -> Iterator[Chunk]:
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


def finish_stage(stage: Path, out: Path, manifest: Manifest) -> None:
    """The complete dataset in ``stage``: its manifest written last, then renamed into ``out``."""
    (stage / "manifest.json").write_text(manifest.to_json())
    publish_stage(stage, out)


def produced_kind(fmt: str, paths: list[Path]) -> str:
    """The dataset kind ``paths`` (files in format ``fmt``) make, as the format's reader declares
    it; :class:`DatasetError` for an unknown format or a missing file."""
    if fmt not in PRODUCES:
        raise DatasetError(f"format {fmt!r}: must be one of {', '.join(FORMATS)}")
    if not paths:
        raise DatasetError("no input files given")
    for p in paths:
        if not Path(p).is_file():
            raise DatasetError(f"{p}: no such file")
    return PRODUCES[fmt]([Path(p) for p in paths])


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DatasetError(f"--out {out}: exists and is not an empty directory; choose a new one")


def import_dataset(fmt: str, paths: list[Path], out: Path, write: ImportWriter, **options: Any) -> ImportResult:
    """:func:`_import_dataset` holding ``out``'s lock (:func:`~tickbench.data.dataset.dataset_lock`):
    a second import or a generation into the same place is refused, naming the first. ``write``
    is the kind's writer (:func:`tickbench.datasets.base.import_dataset` picks it)."""
    with dataset_lock(Path(out), "importing"):
        return _import_dataset(fmt, paths, out, write, **options)


def _import_dataset(
    fmt: str,
    paths: list[Path],
    out: Path,
    write: ImportWriter,
    policy: str = "fail",
    sample: int | None = None,
    memory_limit_mb: int = DEFAULT_MEMORY_MB,
    clock: str = "exchange",
    trade_ids: str = "native",
    progress: Callable[[str, int, int], None] | None = None,
) -> ImportResult:
    """Convert ``paths`` (files in format ``fmt``) into a dataset at ``out`` with ``write``; see
    the module doc.

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
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned_stages(out)  # of an import (or generation) into ``out`` that was killed
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        claim_stage(stage)
        return write(fmt, paths, out, stage, opts, limit, sample, trade_ids)
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
