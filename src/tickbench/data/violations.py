"""What every dataset check shares: the reasons common to both datasets' rows, a violation and
the report that collects them, and the content hash of a Parquet file read a column chunk at a
time (:mod:`tickbench.datasets.paper.validate` checks the paper dataset, :mod:`tickbench.datasets.market.validate`
the market dataset)."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tickbench.data.dataset import joined_utf8, shown

SIZE_NOT_POSITIVE = "size not > 0"
MISSING_VALUE = "missing or non-finite value"
BAD_SIDE = "side not buy/sell"
AMOUNT_NOT_POSITIVE = "amount not > 0"
BACKWARDS = "time going backwards"
ID_NOT_INCREASING = "trade_id not increasing"
OUTSIDE_PARTITION = "row outside its partition (day, exchange, sym)"
HASH_MISMATCH = "partition content differs from its manifest hash"

DEFAULT_SAMPLES = 20
BATCH_ROWS = 65_536


def hash_parquet(path: Path, schema: pa.Schema) -> str:
    """:func:`tickbench.data.dataset.hash_table` of a Parquet file, one column chunk at a time:
    the same digest, in memory bounded by a row group of one column."""
    pf = pq.ParquetFile(path)
    h = hashlib.blake2b(digest_size=16)
    h.update(str(pf.metadata.num_rows).encode())
    for f in schema:
        h.update(f.name.encode() + b"\x00")
        first = True
        for g in range(pf.num_row_groups):
            chunk = pf.read_row_group(g, columns=[f.name]).column(0).combine_chunks().cast(f.type)
            if len(chunk) == 0:
                continue
            if pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
                h.update(("" if first else "\x00").encode() + joined_utf8(chunk))
            elif pa.types.is_timestamp(f.type):
                h.update(np.ascontiguousarray(chunk.cast(pa.int64()).to_numpy(), "<i8").tobytes())
            else:
                h.update(np.ascontiguousarray(chunk.to_numpy()).astype(
                    "<f8" if pa.types.is_floating(f.type) else "<i8").tobytes())
            first = False
    return h.hexdigest()


@dataclass(frozen=True)
class Violation:
    """One bad row: where it is and the values that break the invariant."""

    file: str
    row: int  # 0-based data row index in ``file`` (header not counted)
    reason: str
    values: dict[str, Any]

    def describe(self) -> str:
        """One line, whatever the values hold: strings quoted and escaped, long ones cut."""
        vals = ", ".join(f"{k}={shown(v) if isinstance(v, str) else v}" for k, v in self.values.items())
        return f"{self.file} row {self.row}: {self.reason} ({vals})"


@dataclass
class ValidationReport:
    """The outcome of :func:`validate`: counts per reason and the first violations."""

    directory: str
    files: int = 0
    rows: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    samples: list[Violation] = field(default_factory=list)
    max_samples: int = DEFAULT_SAMPLES
    spec: str = "SPEC §1"  # the invariants checked: SPEC §1 (paper dataset) or §1.3 (market dataset)

    @property
    def ok(self) -> bool:
        return not self.counts

    def add(self, v: Violation) -> None:
        self.counts[v.reason] += 1
        if len(self.samples) < self.max_samples:
            self.samples.append(v)
