"""Probes that find nothing: an as-of query whose every probe time comes before the first
snapshot of its range (a book-only capture that starts late in the day does this to the run's
own probes) is an empty answer of the answer's columns on every engine, never an error."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import TINY_SEED
from tickbench import verify
from tickbench.data.dataset import Dataset
from tickbench.datasets.paper import reference
from tickbench.datasets.paper.params import DAY_NS, day_ns, query_params
from tickbench.engines.registry import adapter, availability, engine_infos

EMBEDDED = ("embedded", "in-memory")
PROBES = 10  # SPEC §2: ten probe times per O-T and O-NBBO


def _first_ts(ds: Dataset, days: list[str], sym: str) -> int:
    """The first snapshot of ``sym`` on ``days``, ns since the epoch."""
    first = ds.scan("book", days).filter(pl.col("sym") == sym).select(pl.col("ts").min()).collect().item()
    return int(first.timestamp() * 1e9) if hasattr(first, "timestamp") else int(first)


@pytest.mark.slow
def test_probes_before_every_snapshot_answer_empty_on_every_embedded_engine(tiny: Dataset, tmp_path: Path) -> None:
    names = [n for n, i in engine_infos().items() if i.kind in EMBEDDED and availability(n).available]
    if not names:
        pytest.skip("no embedded engine is available here")
    base = query_params(tiny.params, TINY_SEED)
    # ten whole-µs times in the first microseconds of each query's range, before its first snapshot
    early_ot = tuple(day_ns(base.month[0]) + (k + 1) * 1_000 for k in range(PROBES))
    early_nbbo = tuple(day_ns(base.multi_day) + (k + 1) * 1_000 for k in range(PROBES))
    assert early_ot[-1] < _first_ts(tiny, base.days("month"), base.symbol) < day_ns(base.month[1]) + DAY_NS
    assert early_nbbo[-1] < _first_ts(tiny, base.days("multi_day"), base.symbol)
    params = dataclasses.replace(base, ot_times=early_ot, nbbo_times=early_nbbo)
    want = {qid: reference.answer(qid, tiny, params) for qid in ("O-T", "O-NBBO")}
    assert all(w.height == 0 for w in want.values())  # nothing before the probes: the empty answer
    failed = []
    for name in names:
        engine = adapter(name, tmp_path / name, tiny, base)
        engine.start()
        try:
            engine.load()
            engine.set_params(params)
            for qid, expected in want.items():
                try:
                    got = verify.normalize(pl.from_arrow(engine.run_query(qid)), expected)  # type: ignore[arg-type]
                except Exception as exc:  # every engine's failure is listed, not only the first
                    failed.append(f"{name} {qid}: {type(exc).__name__}: {exc}")
                    continue
                verdict = verify.compare(got, expected)
                if not verdict.ok:
                    failed.append(f"{name} {qid}: {verdict.reason}")
        finally:
            engine.stop()
    assert not failed, "\n".join(failed)
