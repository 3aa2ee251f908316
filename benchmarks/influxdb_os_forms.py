"""InfluxDB's O-S written three ways, timed side by side on one server (the engine README's
O-S figures come from it).

One ``influxd`` (the installed version) is loaded with day D's book of a dataset (every symbol:
the shard a full load makes for D) and left to settle; then each form runs once as a warm-up,
its answer verified against the reference, and ``--rounds`` rounds follow, each timing every
form once (client-side, and the server's own time), the order reversed every other round so
that neither form always runs first. The forms are query files: by default the engine's own
``queries/O-S.influxql`` (``levels``) and the two in ``benchmarks/influxdb_os_forms/``
(``union``, the 40 fields unioned as rows; ``flat``, the arithmetic as one expression).

    python benchmarks/influxdb_os_forms.py --data data/sf0.2-seed7 --rounds 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import polars as pl

from tickbench.datasets.base import open_dataset
from tickbench.datasets.paper.params import query_params
from tickbench.datasets.paper.reference import answer
from tickbench.engines.influxdb.adapter import Adapter
from tickbench.engines.influxdb.server import DB
from tickbench.run.visibility import wait_settled, wait_visible
from tickbench.verify import compare, normalize

HERE = Path(__file__).parent
FORMS = {
    "levels": HERE.parent / "src" / "tickbench" / "engines" / "influxdb" / "queries" / "O-S.influxql",
    "union": HERE / "influxdb_os_forms" / "union.influxql",
    "flat": HERE / "influxdb_os_forms" / "flat.influxql",
}


class Form(Adapter):
    """The adapter with O-S's text chosen per run."""

    text = ""

    def query_text(self, qid: str) -> str:
        return self.text if qid == "O-S" else super().query_text(qid)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="a dataset (tickbench generate)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--forms", default=",".join(FORMS), help="which of " + ", ".join(FORMS))
    args = ap.parse_args()
    data = open_dataset(args.data)
    params = query_params(data.params, 7)
    texts = {name: FORMS[name].read_text() for name in args.forms.split(",")}
    frames = [("book", pl.read_parquet(f)) for f in data.files("book", [params.day])]
    rows = sum(f.height for _, f in frames)
    want = answer("O-S", data, params)
    work = Path(tempfile.mkdtemp(prefix="tickbench-influxdb-os-"))  # reachable by the service user
    engine = Form(work, data, params)
    engine.start()
    client: dict[str, list[float]] = {n: [] for n in texts}
    server: dict[str, list[float]] = {n: [] for n in texts}
    try:
        engine._load_frames(DB, frames, rows)
        wait_visible(engine)
        engine._settling.add(DB)
        wait_settled(engine)
        engine.connect()
        print(f"{engine.server_version()}: day {params.day}'s book, {rows:,} rows, loaded and settled; "
              f"O-S has {want.height:,} rows", flush=True)
        for name, text in texts.items():
            engine.text = text
            got = pl.from_arrow(engine.run_query("O-S"))
            assert isinstance(got, pl.DataFrame)
            engine.query_server_ns()
            verdict = compare(normalize(got, want), want)
            rel = float(((got["spread"] - want["spread"]).abs() / want["spread"].abs()).max())  # type: ignore[arg-type]
            print(f"{name}: {'verified' if verdict.ok else 'WRONG: ' + verdict.reason}; largest relative "
                  f"error {rel:.3g}", flush=True)
        for r in range(args.rounds):
            for name in texts if r % 2 == 0 else reversed(texts):
                engine.text = texts[name]
                t0 = time.perf_counter()
                engine.run_query("O-S")
                t1 = time.perf_counter()
                ns = engine.query_server_ns()
                client[name].append((t1 - t0) * 1e3)
                server[name].append(ns / 1e6 if ns is not None else float("nan"))
            print(f"round {r + 1}: " + ", ".join(f"{n} {client[n][-1]:,.0f} ms" for n in texts), flush=True)
        for name in texts:
            c = client[name]
            print(f"{name}: median {statistics.median(c):,.0f} ms (server {statistics.median(server[name]):,.0f}), "
                  f"min {min(c):,.0f}, max {max(c):,.0f}, {len(c)} rounds")
    finally:
        engine.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
