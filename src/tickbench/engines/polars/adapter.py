"""Polars as an in-memory columnar engine: the role kdb+'s in-memory RDB plays in the paper.

``load()`` reads the query days' Parquet into two DataFrames held by the adapter, in time order
(as an RDB holds the day's ticks), with ``exchange``, ``sym`` and ``side`` as Categorical (as q
holds them as symbols). There is nothing on disk: a restart reloads (``kind = "in-memory"``).

Query contract: ``queries/<ID>.py`` defines::

    def query(tables: dict[str, pl.LazyFrame], params: dict[str, Any]) -> pl.LazyFrame

``tables`` holds ``"trades"`` and ``"book"`` (each sorted by ``ts``, the sortedness flag set);
``params`` is :meth:`QueryParams.bindings` with every datetime made UTC-aware (see
:func:`bindings`). The adapter collects the returned frame, already in the answer's columns and
order, and hands it over as Arrow.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
import pyarrow as pa

from tickbench.data.dataset import Dataset
from tickbench.data.schema import TABLES
from tickbench.engines.base import Engine
from tickbench.suites.published import QueryParams

LABELS = ("exchange", "sym", "side")
QueryFn = Callable[[dict[str, pl.LazyFrame], dict[str, Any]], pl.LazyFrame]


def bindings(raw: dict[str, Any]) -> dict[str, Any]:
    """The run's named parameters with naive-UTC datetimes made UTC-aware, because the
    columns are ``Datetime("ns", "UTC")`` and Polars will not compare them with naive values."""

    def aware(v: Any) -> Any:
        if isinstance(v, dt.datetime):
            return v.replace(tzinfo=dt.UTC)
        if isinstance(v, list):
            return [aware(x) for x in v]
        return v

    return {k: aware(v) for k, v in raw.items()}


def load_query(path: Path) -> QueryFn:
    """Import ``queries/<ID>.py`` (not a valid module name, hence by file location)."""
    spec = importlib.util.spec_from_file_location(f"tickbench_polars_query_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn: QueryFn = module.query
    return fn


class Adapter(Engine):
    def __init__(self, workdir: Path, dataset: Dataset, params: QueryParams) -> None:
        super().__init__(workdir, dataset, params)
        self.tables: dict[str, pl.DataFrame] = {}
        self.queries: dict[str, QueryFn] = {}

    @classmethod
    def probe(cls) -> str:
        return str(pl.__version__)

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tables = {}

    def stop(self) -> None:
        self.tables = {}

    def load(self) -> int:
        """Read the 30-day period and the multi-exchange day into RAM, in time order."""
        days = self.params.days("month") + self.params.days("multi_day")
        for table in TABLES:
            files = [str(f) for f in self.dataset.files(table, days)]
            df = pl.read_parquet(files)
            df = df.with_columns(pl.col(c).cast(pl.Categorical) for c in LABELS if c in df.columns)
            # Time order (trade_id breaks ties) like an RDB; set_sorted lets group_by_dynamic and
            # join_asof skip their sortedness checks.
            keys = ["ts", "trade_id"] if table == "trades" else ["ts", "exchange"]
            self.tables[table] = df.sort(keys).rechunk().set_sorted("ts")
        return sum(df.height for df in self.tables.values())

    def _query(self, qid: str) -> QueryFn:
        if qid not in self.queries:
            self.queries[qid] = load_query(self.info.query_file(qid))
        return self.queries[qid]

    def run_query(self, qid: str) -> pa.Table:
        if not self.tables:
            raise RuntimeError("Polars: load() has not run since start()")
        lazy = {name: df.lazy() for name, df in self.tables.items()}
        return self._query(qid)(lazy, bindings(self.params.bindings())).collect().to_arrow()

    def settings(self) -> dict[str, Any]:
        return {"threads": pl.thread_pool_size(), "string_labels": "Categorical"}
