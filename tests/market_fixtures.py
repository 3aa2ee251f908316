"""Hand-made market datasets: a few quotes and trades written in the generated layout (one part
file per table and trading day, an instruments table, a manifest of kind ``market``), so the
reference's answers can be checked against values worked out by hand."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tickbench.data.dataset import MANIFEST, Dataset, Manifest, combine_hashes, hash_table
from tickbench.datasets.base import open_dataset
from tickbench.datasets.market import calendar as mc
from tickbench.datasets.market.params import MARKET
from tickbench.datasets.market.schema import INSTRUMENTS_PATH, MARKET_SCHEMAS

D = mc.d_day().isoformat()

#: `tickbench run --suite market` options that keep a test's run as short as it goes, for tests
#: that judge answers and cells, not the users' or the replays' timings: users' windows of
#: 0.3 s, and one during-ingest cell (rate max, one writer, a second of replay at most).
QUICK_MARKET = ("--users-seconds", "0.3", "--ingest-rates", "max", "--ingest-writers", "1", "--ingest-seconds", "1")


def at(day: str, hms: str, us: int = 0) -> int:
    """ns since the epoch of ``day`` at ``hms`` (UTC) plus ``us`` microseconds."""
    t = dt.datetime.fromisoformat(f"{day}T{hms}").replace(tzinfo=dt.UTC)
    return int(t.timestamp()) * 1_000_000_000 + us * 1_000


def _table(name: str, rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    schema = MARKET_SCHEMAS[name]
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in schema]
    arrays = [pa.array(cols[0], pa.int64()).cast(schema.field(0).type)]
    arrays += [pa.array(c, schema.field(i + 1).type) for i, c in enumerate(cols[1:])]
    return pa.Table.from_arrays(arrays, schema=schema)


def write_market(root: Path, syms: Sequence[str], quotes: Sequence[tuple[Any, ...]] = (),
                 trades: Sequence[tuple[Any, ...]] = (), tick: float = 0.01) -> Dataset:
    """A market dataset in ``root`` of the instruments ``syms`` (ranked in that order) and the given rows.

    Quotes are ``(ts_ns, exchange, sym, bid, ask, bsize, asize, seq)``, trades ``(ts_ns, exchange,
    sym, side, price, amount, trade_id)``, in any order: each day's rows are written sorted by
    (sym, ts, exchange, id), as the generator writes them. Every trading day gets a part file per
    table, empty if it has no rows."""
    root.mkdir(parents=True, exist_ok=True)
    venues: dict[str, set[str]] = {s: set() for s in syms}
    for q in quotes:
        venues[q[2]].add(q[1])
    inst = pa.table({
        "sym": list(syms), "rank": list(range(1, len(syms) + 1)), "tick": [tick] * len(syms),
        "lot": [1.0] * len(syms), "primary": [min(venues[s]) if venues[s] else "XNYS" for s in syms],
        "venues": [len(venues[s]) for s in syms],
    }, schema=MARKET_SCHEMAS["instruments"])
    pq.write_table(inst, root / INSTRUMENTS_PATH)
    entries: list[dict[str, Any]] = [{"table": "instruments", "day": None, "path": INSTRUMENTS_PATH,
                                      "rows": inst.num_rows, "bytes": (root / INSTRUMENTS_PATH).stat().st_size,
                                      "hash": hash_table(inst)}]
    for name, rows, idcol in (("quotes", quotes, 7), ("trades", trades, 6)):
        for day in mc.DAYS:
            lo = mc.day_ns(day)
            mine = sorted((r for r in rows if lo <= r[0] < lo + mc.NS_PER_DAY),
                          key=lambda r, i=idcol: (r[2], r[0], r[1], r[i]))
            t = _table(name, mine)
            rel = f"{name}/{day.isoformat()}/block-0.parquet"
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(t, root / rel)
            entries.append({"table": name, "day": day.isoformat(), "block": 0, "ranks": [1, len(syms)],
                            "syms": [min(syms), max(syms)], "path": rel, "rows": t.num_rows,
                            "bytes": (root / rel).stat().st_size, "hash": hash_table(t)})
    content_hash = combine_hashes({e["path"]: e["hash"] for e in entries})
    # Not the generator's output (its part files are not the generator's blocks, its scale none):
    # recorded as an import, whose manifest fields are checked against its data alone.
    manifest = Manifest(scale=1.0, seed=0, symbols=0, content_hash=content_hash, partitions=entries, csv={},
                        params=mc.default_params(), source="import:fixture", kind=MARKET, universe=len(syms),
                        calendar=mc.calendar_dict())
    (root / MANIFEST).write_text(manifest.to_json())
    return open_dataset(root)
