"""The paper's dataset from imported files (``tickbench import`` of Tardis, cryptofeed or LOBSTER
trades and book files, SPEC §1): :func:`write_paper`, this kind's
:meth:`~tickbench.datasets.base.DatasetKind.import_into`."""

from __future__ import annotations

from pathlib import Path

from tickbench.data.dataset import Manifest, combine_hashes
from tickbench.data.derive import derive_params
from tickbench.data.importers import FORMATS, ImportResult, coalesce, finish_stage
from tickbench.data.importers.common import ReaderOptions
from tickbench.data.importers.writer import DatasetBuilder, missing_id_hint, write_bulk_csv
from tickbench.datasets.paper.schema import TABLES


def write_paper(fmt: str, paths: list[Path], out: Path, stage: Path, opts: ReaderOptions, limit: int,
                sample: int | None, trade_ids: str) -> ImportResult:
    """``paths`` read by ``fmt``'s reader, every row checked with the paper's invariants, written
    into ``stage`` as a paper dataset (partitions, the bulk-load day's CSV, the manifest with the
    parameters derived from the data), then renamed into ``out``."""
    builder = DatasetBuilder(stage, opts.policy, limit, hint=missing_id_hint)
    for chunk in coalesce(FORMATS[fmt](paths, opts), limit // 16):
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
            "format": fmt, "files": sorted(p.name for p in paths), "policy": opts.policy,
            "sample": sample, "clock": opts.clock, "trade_ids": trade_ids,
            "rows_read": dict(builder.rows_in), "dropped": dict(builder.dropped),
            "levels": "20 real levels per side in every row (rows with fewer were reported)",
            **opts.notes,
        }},
    )
    finish_stage(stage, out, manifest)
    return ImportResult(manifest, dict(builder.dropped), dict(builder.rows_in))
