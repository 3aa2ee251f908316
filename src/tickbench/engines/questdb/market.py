"""QuestDB's market suite (SPEC §2.3): the market schema (``market_schema.sql``), its load over
ILP, M-W, M-SE, and the bindings its query files take.

The load sends each day of quotes and trades over ILP/HTTP, as the paper's load does, sorted by
(ts, exchange, seq) and (ts, exchange, trade_id): rows of one ts are then stored in the SPEC's
order, which QuestDB's ``LATEST ON``, ``ASOF JOIN``, ``first()``/``last()`` and window functions
follow. The instruments table (no timestamp, so not an ILP table) is read by QuestDB's own
``read_parquet()``.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tickbench.datasets.market.params import MarketParams
from tickbench.engines.base import EngineUnavailable, LoadFigures
from tickbench.engines.questdb.schema import CREATE, TS_PATTERN, bind

if TYPE_CHECKING:
    from questdb import Sender

    from tickbench.data.dataset import Dataset
    from tickbench.engines.base import Endpoint

MARKET_TABLES = ("quotes", "trades")
MARKET_SYMBOLS = {"quotes": ["exchange", "sym"], "trades": ["exchange", "sym", "side"]}
# The storage order of each table's rows: rows of one ts in the SPEC's tie order.
MARKET_ORDER = {"quotes": ["ts", "exchange", "seq"], "trades": ["ts", "exchange", "trade_id"]}
MIN_SYM_CAPACITY = 1024
INSTRUMENTS_IMPORT = "market/instruments.parquet"  # under the server's import root
# M-W's tables: <mw|mb>_<fmt>_<table>_<tag>, a new tag for each load.
W_TABLE = re.compile(r"(mw|mb)_(csv|parquet)_(quotes|trades)_[0-9a-f]{12}")


def market_schema(universe: int) -> dict[str, str]:
    """``market_schema.sql``'s CREATE TABLE statements, by table, with sym's SYMBOL capacity: the
    power of two at or above twice the universe (QuestDB's advice: a capacity above the number
    of distinct values; B50's symbols outside the universe are never stored)."""
    capacity = MIN_SYM_CAPACITY
    while capacity < 2 * universe:
        capacity *= 2
    text = "\n".join(line for line in (Path(__file__).parent / "market_schema.sql").read_text().splitlines()
                     if not line.lstrip().startswith("--"))
    out: dict[str, str] = {}
    for stmt in filter(None, (s.strip() for s in text.split(";"))):
        match = CREATE.search(stmt)
        if match:
            out[match.group(1)] = bind(stmt, {"sym_capacity": capacity})
    return out


def market_bindings(params: MarketParams) -> dict[str, Any]:
    """The market query files' bindings: the parameters' own, and two more that QuestDB's SQL
    needs, which has no row values or arrays of text to match against:

    * ``ui_syms``: each M-STATS-UI request's basket, as ``$ui_syms_<i>`` (for ``sym IN (…)``);
    * ``p_keys``: P's trades as one text each, ``<n>:<exchange><sym>:<trade_id>`` with n the
      exchange's length in UTF-16 units (what QuestDB's ``length()`` counts), so that the key
      names one (exchange, sym, trade_id) whatever characters the names hold.
    """
    out = params.bindings()
    out["ui_syms"] = [list(r.syms) for r in params.UI]
    out["p_keys"] = [f"{len(e.encode('utf-16-le')) // 2}:{e}{s}:{i}" for e, s, i in params.P]
    return out


class QuestDBMarket:
    """QuestDB's part for the market dataset (picked by ``by_kind``): the tables of
    ``market_schema.sql`` in the server's namespace beside the paper's, loaded over ILP; W's
    preparation (:meth:`~tickbench.engines.questdb.load.QuestDBLoad.bulk_prepare`) and the query
    mode after the load are the paper's own."""

    if TYPE_CHECKING:  # the adapter's own, used here
        dataset: Dataset
        params: Any
        endpoint: Endpoint | None

        @property
        def root(self) -> Path: ...
        def _exec(self, sql: str, keep: bool = False, pool: Any = None) -> dict[str, Any]: ...
        def _rows(self, sql: str) -> list[dict[str, Any]]: ...
        def _sender(self) -> Sender: ...
        def _await(self, tables: Iterable[str]) -> None: ...
        def _imp(self, name: str, path: Path, schema: list[dict[str, str]],
                 extra: dict[str, str] | None = None) -> dict[str, Any]: ...
        def _figures(self, names: dict[str, str], nbytes: int, path_name: str) -> LoadFigures: ...
        def settled_storage(self, tables: dict[str, set[str] | None]) -> dict[str, int]: ...
        def _stage_parquet(self, table: str, stage_name: str) -> tuple[list[str], int]: ...
        def start(self) -> None: ...
        def stop(self) -> None: ...
        def into_query_mode(self) -> None: ...

    #: The parameters object the query files were last bound to, and its bindings.
    bindings_of: tuple[object, dict[str, Any]] | None = None

    def query_bindings(self) -> dict[str, Any]:
        """What the query files bind: the market suite's :func:`market_bindings`, or the
        parameters' own; made once per parameters object (they are frozen), not per repetition."""
        params = self.params
        if self.bindings_of is not None and self.bindings_of[0] is params:
            return self.bindings_of[1]
        bindings: dict[str, Any] = market_bindings(params) if isinstance(params, MarketParams) else params.bindings()
        self.bindings_of = (params, bindings)
        return bindings

    def _market_create(self, table: str, name: str) -> None:
        """Create ``name`` as ``market_schema.sql``'s ``table``, replacing any earlier one."""
        self._exec(f"DROP TABLE IF EXISTS {name}")
        statement = market_schema(self.dataset.universe or 0)[table]
        self._exec(CREATE.sub(f"CREATE TABLE {name}", statement, count=1))

    def _send_market(self, sender: Sender, table: str, target: str, days: Iterable[str]) -> int:
        """Send ``table``'s Parquet files of ``days`` to ``target`` over ILP, one day at a time in
        :data:`MARKET_ORDER` (in-order appends); the number of rows sent."""
        rows = 0
        for day in days:
            files = self.dataset.files(table, [day])
            if not files:
                continue
            # Sorted as plain strings (by their bytes, the SPEC's exchange order), then
            # dictionary-encoded: the client sends pandas categoricals as symbols fastest.
            frame = pa.concat_tables([pq.read_table(f) for f in files]).sort_by(
                [(c, "ascending") for c in MARKET_ORDER[table]])
            for name in MARKET_SYMBOLS[table]:
                i = frame.schema.get_field_index(name)
                frame = frame.set_column(i, name, pc.dictionary_encode(frame.column(i)))
            sender.dataframe(frame.to_pandas(), table_name=target, symbols=MARKET_SYMBOLS[table], at="ts")
            rows += frame.num_rows
        return rows

    def _load_instruments(self, name: str = "instruments") -> int:
        """The instruments table, as ``name``, through ``read_parquet()`` (which reads only under
        the server's import root, so the file is copied there first); a non-WAL table,
        committed at once."""
        self._market_create("instruments", name)
        staged = self.root / "import" / INSTRUMENTS_IMPORT
        staged.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.dataset.root / "instruments.parquet", staged)
        staged.chmod(0o644)  # read by the server's user
        self._exec(f"INSERT INTO {name} SELECT sym, rank, tick, lot, \"primary\", venues "
                   f"FROM read_parquet('{INSTRUMENTS_IMPORT}')")
        return int(self._exec(f"SELECT count() FROM {name}")["dataset"][0][0])

    def _load_market(self) -> int:
        if self.endpoint is not None:
            raise EngineUnavailable("the market suite runs on tickbench's own QuestDB server, not an external endpoint")
        rows = self._load_instruments()
        for table in MARKET_TABLES:
            self._market_create(table, table)
        days = self.params.load_days()
        with self._sender() as sender:
            rows += sum(self._send_market(sender, table, table, days) for table in MARKET_TABLES)
            sender.flush()
        self._await(MARKET_TABLES)
        self.into_query_mode()  # the paper's load does the same: both datasets' queries under one mode
        return rows

    # ---- M-W -------------------------------------------------------------------------------

    def _w_names(self, kind: str, fmt: str) -> dict[str, str]:
        """Fresh names for one M-W load's tables, the earlier loads' ``kind`` tables dropped. A new
        name each time: QuestDB drops a WAL table asynchronously, and a table created again at
        once under the dropped one's name failed now and then ("could not open read-write
        [file=…/txn_seq/_wal_index.d]")."""
        for row in self._rows("SELECT table_name FROM tables()"):
            name = str(row["table_name"])
            if W_TABLE.fullmatch(name) and name.startswith(f"{kind}_{fmt}_"):
                self._exec(f"DROP TABLE IF EXISTS {name}")
        tag = uuid.uuid4().hex[:12]
        return {t: f"{kind}_{fmt}_{t}_{tag}" for t in MARKET_TABLES}

    def _bulk_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """M-W into fresh tables ``mw_<fmt>_<table>_<tag>`` created from ``market_schema.sql`` (the
        server keeps its tables in its own root; ``scratch`` is not used). CSV through /imp,
        QuestDB's CSV path, into the created tables; Parquet through QuestDB's own reader, a
        table's files in one INSERT ordered as the load orders them (one commit)."""
        names = self._w_names("mw", fmt)
        nbytes = 0
        if fmt == "csv":
            for table, name in names.items():
                self._market_create(table, name)
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                if self.dataset.manifest.csv[table]["rows"]:  # /imp refuses a header alone
                    # atomicity=abort: a row that does not parse fails the load, never skipped.
                    self._imp(name, path, [{"name": "ts", "type": "TIMESTAMP_NS", "pattern": TS_PATTERN}],
                              {"atomicity": "abort"})
            return self._figures(names, nbytes, "REST /imp into tables created from market_schema.sql")
        if fmt != "parquet":
            raise ValueError(f"unknown format {fmt!r}")
        for table, name in names.items():
            self._market_create(table, name)
            rels, size = self._stage_parquet(table, "mw")
            nbytes += size
            union = " UNION ALL ".join(f"SELECT * FROM read_parquet('{r}')" for r in rels)
            order = ", ".join(MARKET_ORDER[table])
            self._exec(f"INSERT INTO {name} SELECT * FROM ({union}) ORDER BY {order}")
        return self._figures(names, nbytes, "read_parquet() into tables created from market_schema.sql")

    def _baseline_load_market(self, fmt: str, scratch: Path) -> LoadFigures:
        """QuestDB's own simplest path on the same files, into tables it creates itself: CSV
        through /imp with only the timestamp's format given; Parquet through ``CREATE TABLE AS``
        from ``read_parquet()`` (the files copied under the import root first, and counted)."""
        names = self._w_names("mb", fmt)
        nbytes = 0
        if fmt == "csv":
            for table, name in names.items():
                path = self.dataset.csv_file(table)
                nbytes += path.stat().st_size
                if self.dataset.manifest.csv[table]["rows"]:
                    self._imp(name, path, [{"name": "ts", "type": "TIMESTAMP_NS", "pattern": TS_PATTERN}])
                else:  # /imp refuses a header alone, and infers no types from it
                    self._market_create(table, name)
            return self._figures(names, nbytes, "REST /imp, table created by QuestDB")
        if fmt != "parquet":
            raise ValueError(f"unknown format {fmt!r}")
        for table, name in names.items():
            rels, size = self._stage_parquet(table, "mbaseline")
            nbytes += size
            union = " UNION ALL ".join(f"SELECT * FROM read_parquet('{r}')" for r in rels)
            self._exec(f"CREATE TABLE {name} AS ({union} ORDER BY ts) TIMESTAMP(ts) PARTITION BY DAY")
        return self._figures(names, nbytes, "read_parquet() into CREATE TABLE AS")

    # ---- M-SE ------------------------------------------------------------------------------

    def _storage_bytes_market(self) -> dict[str, int]:
        """M-SE: the 20 days' partitions of quotes and trades and the instruments table, split
        as SE's (:meth:`~tickbench.engines.questdb.load.QuestDBLoad.settled_storage`)."""
        days = set(self.params.load_days())
        return self.settled_storage({**{t: days for t in MARKET_TABLES}, "instruments": None})

