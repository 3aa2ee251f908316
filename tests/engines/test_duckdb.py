"""DuckDB-specific behaviour: the lookups' look further back behind empty windows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tickbench.data.dataset import Dataset
from tickbench.datasets.paper.params import QueryParams
from tickbench.engines.registry import adapter_class, engine_infos


@pytest.mark.slow
def test_lookups_behind_empty_windows(tiny: Dataset, tiny_params: QueryParams, tmp_path: Path) -> None:
    """O-T reads the ten probes' one-minute windows in one scan and O-NBBO each venue's; a probe
    whose window is empty (or misses a venue) looks further back: over the crafted gaps of
    ``lookup_gaps``, every answer is the latest row at or before its probe."""
    import polars as pl

    from tests.engines.lookup_gaps import Gaps
    from tickbench.engines.duckdb.adapter import SCHEMA, SORT_KEY, VENUES

    gaps = Gaps.make(tiny, tiny_params)
    engine = adapter_class("duckdb")(engine_infos()["duckdb"], tmp_path, tiny, gaps.params)
    engine.start()
    try:
        con = engine._conn()  # type: ignore[attr-defined]
        con.execute(SCHEMA)
        book = gaps.book.to_arrow()
        con.register("crafted", book)
        con.execute(f"INSERT INTO book SELECT * FROM crafted ORDER BY {SORT_KEY}")
        con.execute(VENUES)
        got_ot, got_nbbo = (pl.from_arrow(engine.run_query(q)) for q in ("O-T", "O-NBBO"))
    finally:
        engine.stop()
    assert isinstance(got_ot, pl.DataFrame) and isinstance(got_nbbo, pl.DataFrame)
    gaps.check(got_ot, got_nbbo)
