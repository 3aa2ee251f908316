"""The engine contract.

An engine lives in one folder, ``engines/<name>/`` (or ``<package>/<name>/`` for a package named in
``$TICKBENCH_ENGINE_PACKAGES``), which holds:

* ``engine.toml`` — its description: title, kind (``embedded``, ``in-memory`` or ``server``,
  which must agree with its adapter's capabilities: a test checks it), the dataset kinds it
  serves (``kinds = ["paper", "market"]``), how to install it and
  the Python packages its client needs (``pip``), the query language's file extension (and
  ``other_extensions``, a second language's, for queries the first cannot express), and
  the benchmarks and suites it cannot run, each with a reason (``[unsupported]``) — gaps are
  data, and the support matrix is generated from them and from the capabilities below;
* ``adapter.py`` — a class ``Adapter``: an :class:`Engine` and the capabilities it has;
* ``queries/<ID>.<ext>`` — one native query per benchmark id, run as written (one file per id,
  in the main extension or one of ``other_extensions``); an engine whose ``engine.toml`` names
  ``queries_from = "<engine>"`` (the same dialect, e.g. TimescaleDB's PostgreSQL) keeps only
  the files that differ: its own file wins, the named engine's is used otherwise
  (:meth:`EngineInfo.query_file`, :meth:`EngineInfo.query_owner`);
* ``README.md`` — its schema and the choices behind it.

The folder name is the engine's CLI name, results key and test id. Adapters do I/O only: the
runner (:mod:`tickbench.run`) owns the clock, the repetitions, the timeouts and the memory
measurement. An adapter never times, sleeps, polls, retries or flushes caches: an engine that
makes acknowledged writes visible later says so through :meth:`Engine.pending_visibility`
(and :meth:`IngestClient.pending_visibility`), one that goes on working on its store after a
call returned (compaction) says so through :meth:`Engine.pending_settle`, and the runner waits
(:mod:`tickbench.run.visibility`).

**Capabilities.** :class:`Engine` is what every engine does (start, load, query, stop). What
only some engines do is a small class of its own, which the adapter also subclasses and the
runner and the suites check with ``isinstance`` / ``issubclass``, never by probing methods.
Each serves every dataset kind the engine serves (``engine.toml``'s ``kinds``; a suite runs
on an engine only if it serves the suite's kind): the adapter composes its part for each kind
with :func:`by_kind` (the paper's tables or the market's), so there is one load path, one W
and one set of settings per engine, whatever the dataset:

* :class:`BulkLoad` — W and M-W: the bulk-load day into a fresh durable store, and the
  engine's own simplest bulk path beside it;
* :class:`Storage` — SE and M-SE: the bytes the engine uses on disk for the loaded period;
* :class:`Ingest` — an ingest store: the ingest suites (tick latency, stream, durability:
  writer clients, read-back, durability settings) and the market's queries while day D streams
  into an empty market store (each user with its own :class:`IngestReader`);
* :class:`EngineTime` — the engine reports each query's own (server-side) time;
* :class:`SharedReaders` — concurrency clients as processes of their own, each opening the
  loaded store beside the others (without it, clients are threads of one process);
* :class:`Server` — :meth:`Engine.start` launches server processes (``memory_pids`` names
  them): the durability suite kills those, a failed cell checks whether they still run.
  :class:`tickbench.engines.server.ServerEngine` implements it, with the server lifecycle
  (install, service user, ports, start / ready / stop, attaching through a port file,
  restarts for a server-wide setting) written once for every server engine.

The engine's kind follows from them (:func:`kind_of`); an engine that is not
:attr:`Engine.persistent` is in-memory.

An engine whose ``external_endpoint`` flag is set can also run against a server the user
already runs (an :class:`Endpoint`, from ``tickbench run --endpoint ENGINE=HOST:PORT`` or a
``--config`` file): then tickbench installs, starts, stops, kills and reconfigures nothing;
it creates its own tables in a namespace of its own on that server (a schema, a table prefix
or a database: each engine's README says which), marked as tickbench's, and drops them after
the run unless the endpoint says ``keep``. The runner hands the endpoints to the engine
processes through ``$TICKBENCH_ENDPOINTS`` (JSON; never a password: only the names of the
environment variables that hold one).
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import pyarrow as pa

from tickbench.data.dataset import DEFAULT_KIND, Dataset
from tickbench.datasets.base import RunParams

ENGINES_DIR = Path(__file__).parent
#: Further packages of engine folders, comma-separated importable package names (engines kept
#: outside tickbench's tree).
PACKAGES_ENV = "TICKBENCH_ENGINE_PACKAGES"
#: The endpoints of the run, as JSON ``{engine: Endpoint.as_json()}``, for the engine processes.
ENDPOINTS_ENV = "TICKBENCH_ENDPOINTS"


class EngineUnavailable(Exception):
    """The engine cannot run on this machine; the message says why and how to enable it."""


class EngineConfigError(ValueError):
    """An ``engine.toml`` that cannot be used as it is; the message names the file and what to fix."""


@dataclass(frozen=True)
class EngineInfo:
    """The contents of an ``engine.toml``, and the folder it is in."""

    name: str
    folder: Path
    title: str
    kind: str
    language: str
    extension: str
    install: str
    unsupported: dict[str, str] = field(default_factory=dict)
    notes: str = ""
    #: The Python packages the engine's client needs (pip requirement strings).
    pip: tuple[str, ...] = ()
    #: A word the engine's own EXPLAIN always prints (the tests check a kept plan is the engine's).
    plan_word: str = ""
    #: A word on publishing its results (e.g. a licence's terms), shown by ``tickbench engines``.
    publishing: str = ""
    #: Query files in another language the engine also runs (InfluxDB: Flux beside InfluxQL).
    other_extensions: tuple[str, ...] = ()
    #: Where W's (and M-W's) clock stops on this engine, and what the engine still does after it
    #: (SPEC: committed durably and queryable; background compaction after that is outside W for
    #: every engine, a conversion the engine's experts make part of loading is inside it).
    w_clock: str = ""
    #: The engine whose query files this one runs where it has none of its own (``""``: none).
    queries_from: str = ""
    #: The folders of query files after the engine's own: the ``queries_from`` engine's, then
    #: that one's ``queries_from``'s, and so on (resolved by :meth:`read` against the known engines).
    fallback_queries: tuple[Path, ...] = ()
    #: The dataset kinds the engine serves (``kinds`` in ``engine.toml``; the paper's alone
    #: when absent): a suite runs on it only if it serves the suite's ``dataset_kind``.
    kinds: tuple[str, ...] = (DEFAULT_KIND,)

    @classmethod
    def read(cls, folder: Path, engines: Mapping[str, Path] | None = None) -> EngineInfo:
        """The ``engine.toml`` of ``folder``; ``engines`` (name -> folder, the registry's) resolves
        its ``queries_from``: an unknown engine, the engine itself, a cycle or an engine whose query
        files have another extension is an :class:`EngineConfigError` naming the file."""
        raw = tomllib.loads((folder / "engine.toml").read_text())
        return cls(
            name=folder.name,
            folder=folder,
            title=raw["title"],
            kind=raw["kind"],
            language=raw["language"],
            extension=raw["extension"],
            install=raw["install"],
            unsupported=dict(raw.get("unsupported", {})),
            notes=raw.get("notes", ""),
            pip=tuple(raw.get("pip", ())),
            plan_word=raw.get("plan_word", ""),
            publishing=raw.get("publishing", ""),
            other_extensions=tuple(raw.get("other_extensions", ())),
            w_clock=raw.get("w_clock", ""),
            queries_from=raw.get("queries_from", ""),
            fallback_queries=_fallback_queries(folder, raw, engines or {}),
            kinds=_kinds(folder, raw),
        )

    def query_file(self, qid: str) -> Path:
        """The query file of ``qid``: the one that exists among the main extension's and the
        ``other_extensions``' in the engine's own ``queries/``, else in the first folder of
        :attr:`fallback_queries` that has one (the main extension's own path when none does); two
        in one folder are an error."""
        names = [f"{qid}.{ext}" for ext in (self.extension, *self.other_extensions)]
        for queries in (self.folder / "queries", *self.fallback_queries):
            found = [queries / n for n in names if (queries / n).is_file()]
            if len(found) > 1:
                raise ValueError(f"{self.name}: {qid} has {len(found)} query files in {queries} "
                                 f"({', '.join(p.name for p in found)})")
            if found:
                return found[0]
        return self.folder / "queries" / names[0]

    def query_owner(self, qid: str) -> str | None:
        """The engine whose query file of ``qid`` this engine runs (its own name, or a
        ``queries_from`` engine's); ``None`` when there is none."""
        path = self.query_file(qid)
        return path.parent.parent.name if path.is_file() else None

    def query_text(self, qid: str) -> str:
        return self.query_file(qid).read_text()


def _kinds(folder: Path, raw: dict[str, Any]) -> tuple[str, ...]:
    """``raw``'s ``kinds`` (the paper's alone when absent): a non-empty list of kind names, else an
    :class:`EngineConfigError` naming the file."""
    given = raw.get("kinds", [DEFAULT_KIND])
    if not isinstance(given, list) or not given or not all(isinstance(k, str) and k.isidentifier() for k in given):
        raise EngineConfigError(f"{folder / 'engine.toml'}: kinds = {given!r} is not a list of dataset kind names; "
                                f'write e.g. kinds = ["{DEFAULT_KIND}"]')
    return tuple(given)


def _fallback_queries(folder: Path, raw: dict[str, Any], engines: Mapping[str, Path]) -> tuple[Path, ...]:
    """The ``queries/`` folders along the ``queries_from`` chain that starts at ``folder``'s
    ``engine.toml`` (``raw``), each checked (:meth:`EngineInfo.read`)."""
    out: list[Path] = []
    chain = [folder.name]
    toml, extension = folder / "engine.toml", raw.get("extension")
    name = raw.get("queries_from", "")
    while name:
        if not isinstance(name, str) or name not in engines:
            raise EngineConfigError(f"{toml}: queries_from = {name!r} is not an engine (known: "
                                    f"{', '.join(sorted(engines))}); name one, or remove the key")
        if name in chain:
            what = "the engine itself" if name == chain[-1] else "a cycle (" + " -> ".join([*chain, name]) + ")"
            raise EngineConfigError(f"{toml}: queries_from = {name!r} is {what}; name another engine, or remove "
                                    "the key")
        theirs = tomllib.loads((engines[name] / "engine.toml").read_text())
        if theirs.get("extension") != extension:
            raise EngineConfigError(f"{toml}: queries_from = {name!r}, whose query files are .{theirs.get('extension')}"
                                    f", not .{extension}: name an engine of the same query language")
        chain.append(name)
        out.append(engines[name] / "queries")
        toml, name = engines[name] / "engine.toml", theirs.get("queries_from", "")
    return tuple(out)


@dataclass(frozen=True)
class Endpoint:
    """A server the user runs, for engine ``engine``, that tickbench uses as it is.

    Credentials never travel in it: ``password_env`` names the environment variable that holds
    the password (each engine also reads its client's usual variables, e.g. ``PGPASSWORD``).
    ``namespace`` is where tickbench's own tables go (a schema, a table prefix or a database,
    per engine; ``None``: the engine's default); ``keep`` leaves them after the run."""

    engine: str
    host: str
    port: int
    user: str | None = None
    database: str | None = None
    password_env: str | None = None
    namespace: str | None = None
    keep: bool = False

    def password(self) -> str | None:
        """The password from ``$password_env`` (``None`` when unnamed or unset)."""
        return os.environ.get(self.password_env) if self.password_env else None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def describe(self) -> str:
        """How messages name it: ``the postgres endpoint db1:5432``."""
        return f"the {self.engine} endpoint {self.address}"

    def as_json(self) -> dict[str, Any]:
        """Everything but credentials (the user name too stays out of results)."""
        return {"engine": self.engine, "host": self.host, "port": self.port, "database": self.database,
                "password_env": self.password_env, "namespace": self.namespace, "keep": self.keep}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Endpoint:
        return cls(**raw)


def endpoint_for(engine: str) -> Endpoint | None:
    """The endpoint the run gives ``engine`` (from ``$TICKBENCH_ENDPOINTS``), if any."""
    raw = os.environ.get(ENDPOINTS_ENV)
    if not raw:
        return None
    given = json.loads(raw).get(engine)
    return Endpoint.from_json(given) if given else None


@dataclass(frozen=True)
class LoadFigures:
    """What a bulk load did: rows committed and bytes of input read.

    An engine whose committed rows become visible asynchronously (see
    :meth:`Engine.pending_visibility`) cannot count them on return: it gives ``count``, which
    the runner calls once they are visible, inside the load's timed interval, in place of ``rows``.
    """

    rows: int
    input_bytes: int
    detail: dict[str, Any] = field(default_factory=dict)
    count: Callable[[], int] | None = None

    def committed_rows(self) -> int:
        """The rows committed: ``count()`` when given (call it once the load is visible)."""
        return self.count() if self.count is not None else self.rows


class IngestClient(ABC):
    """One writer's connection to an ingest store; used from one thread at a time.

    Rows are tuples in SPEC column order with ``ts`` as integer nanoseconds since the epoch.
    :meth:`write` returns when the engine has acknowledged the rows (committed, under the
    store's durability setting), never earlier.
    """

    @abstractmethod
    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Write ``rows`` into ``table`` ("trades" or "book") and wait for the acknowledgement."""

    def pending_visibility(self) -> bool:
        """Whether rows this client wrote (acknowledged) are not yet all visible to a new query
        (see :meth:`Engine.pending_visibility`); the runner polls it after the writes, before
        reading them back. The default is ``False``: visible once acknowledged."""
        return False

    def close(self) -> None:  # noqa: B027 - optional: most clients have nothing to release
        """Release the connection."""


class StreamSender(ABC):
    """One stream writer's connection on an engine's fastest streaming path (:class:`StreamTarget`);
    used by one thread. :meth:`send` returns when the engine has acknowledged the payload."""

    @abstractmethod
    def send(self, payload: Any) -> None:
        """Send one payload made by :meth:`StreamTarget.encode` and wait for the acknowledgement."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release the connection."""


class StreamTarget(ABC):
    """Where the stream suite's writers send: the engine's fastest streaming path.

    The suite cuts the rows into batches and has each writer :meth:`encode` its batches
    *before* its clock starts (columnar Arrow, or the engine's wire format), then times only
    :meth:`StreamSender.send`. A target whose :attr:`in_process` is ``False`` is plain data
    (pickled into each writer *process*, which connects on its own); an embedded engine's
    target (``in_process``) holds the open store and its writers are threads of the worker.
    Targets do I/O only: no clocks, sleeps or retries.
    """

    #: Whether writers must run inside the engine's worker process (an embedded store).
    in_process: ClassVar[bool] = False
    #: One line for the results: the client path (library, protocol, payload form).
    path: ClassVar[str] = ""

    @abstractmethod
    def encode(self, table: str, batch: pa.Table) -> Any:
        """``batch`` (rows of ``table`` in SPEC column order) in the form :meth:`StreamSender.send`
        takes; runs before the clock."""

    def wire_bytes(self, payload: Any) -> bytes:
        """The bytes ``payload`` puts on the wire, for the suite's loopback sink (the harness
        ceiling); an in-process target's payload has none (the default: empty)."""
        return b""

    def payload_bytes(self, payload: Any) -> int:
        """The size of ``payload`` in bytes, for the record (default: its wire bytes)."""
        return len(self.wire_bytes(payload))

    @abstractmethod
    def connect(self) -> StreamSender:
        """A new connection to the open ingest store (in the process that will send)."""

    def connect_sink(self, host: str, port: int) -> StreamSender | None:
        """A connection on the same client path to the suite's loopback HTTP sink (which
        acknowledges any POST with 204 and stores nothing), when the client can speak to it;
        ``None``: the suite posts :meth:`wire_bytes` with its own HTTP client instead."""
        return None


def batch_rows(batch: pa.Table) -> list[tuple[Any, ...]]:
    """``batch`` (SPEC column order) as the row tuples :meth:`IngestClient.write` takes: ``ts``
    as integer nanoseconds, the other columns as Python values."""
    cols = [batch.column(0).cast(pa.int64()).to_pylist()] + [batch.column(i).to_pylist()
                                                            for i in range(1, batch.num_columns)]
    return list(zip(*cols, strict=True))


class RowsTarget(StreamTarget):
    """The default stream target of an engine with the ingest capability: its
    :class:`IngestClient` (row tuples, one ``write`` per batch) in threads of the worker."""

    in_process = True
    path = "IngestClient.write of row tuples (the engine's generic ingest client)"

    def __init__(self, engine: Ingest) -> None:
        self.engine = engine

    def encode(self, table: str, batch: pa.Table) -> Any:
        return table, batch_rows(batch)

    def connect(self) -> StreamSender:
        return _ClientSender(self.engine.ingest_client())


class _ClientSender(StreamSender):
    def __init__(self, client: IngestClient) -> None:
        self.client = client

    def send(self, payload: Any) -> None:
        table, rows = payload
        self.client.write(table, rows)

    def close(self) -> None:
        self.client.close()


class Engine(ABC):
    """One engine under test, bound to its description, a working directory and a dataset.

    Lifecycle: ``start()`` → ``load()`` → ``run_query(id)``… → ``stop()``; ``start()`` after
    ``stop()`` reopens the same loaded data (the cold protocol relies on it). What only some
    engines do is a capability class of its own (:class:`BulkLoad`, :class:`Storage`,
    :class:`Ingest`, :class:`EngineTime`, :class:`SharedReaders`, :class:`ProcessClients`,
    :class:`Server`), each serving every dataset kind the engine serves (:attr:`EngineInfo.kinds`).

    The market suite's users: with :class:`SharedReaders`, each user is a client process of its
    own, an adapter opened with :meth:`SharedReaders.start_shared` and bound to the user's
    parameters; with :class:`ProcessClients`, a thread of the engine's process with a client from
    :meth:`ProcessClients.open_client`; an in-memory engine's users are threads over shallow
    copies of the loaded adapter, given their own parameters with :meth:`set_params`, whose
    ``run_query`` runs from several threads at once (what the copies share must be safe for
    that). The engine's own limit that shapes this is :attr:`users_limit`; a user count the
    engine cannot serve is declared in ``[unsupported]`` as ``"M-VWAB-12D/users=100" = "why"``.
    """

    #: Whether the loaded data survive :meth:`stop` (``False`` for an in-memory engine: a
    #: restart must :meth:`load` again, and W, SE and durability do not apply).
    persistent: ClassVar[bool] = True
    #: The engine's own limit on concurrent clients of one store, as its documentation states
    #: it, where that limit shapes how the market suite's users run (one open per process, one
    #: process per store); recorded with each users cell and shown in the report. Empty: none.
    users_limit: ClassVar[str] = ""
    #: Whether the engine can run against a server the user runs (:class:`Endpoint`): no
    #: install, start, stop, kill or server-wide setting; its own marked tables in a
    #: namespace of its own, dropped after the run unless kept (see ``engines/server.py``).
    external_endpoint: ClassVar[bool] = False

    def __init__(self, info: EngineInfo, workdir: Path, dataset: Dataset, params: RunParams) -> None:
        self.info = info
        # Absolute: a server started with another working directory must find its files.
        self.workdir = workdir.resolve()
        self.dataset = dataset
        self.params = params
        #: The user's server this engine runs against, or ``None`` (tickbench's own).
        self.endpoint: Endpoint | None = endpoint_for(info.name) if self.external_endpoint else None

    @classmethod
    def engine_name(cls) -> str:
        """The engine's name: its adapter's folder (for messages of class-level calls)."""
        module = sys.modules.get(cls.__module__)
        path = getattr(module, "__file__", None)
        return Path(path).parent.name if path else cls.__module__.rsplit(".", 2)[-2]

    @classmethod
    @abstractmethod
    def probe(cls) -> str:
        """The engine's version if it can run here; raise :class:`EngineUnavailable` if not."""

    @classmethod
    def install(cls, progress: Callable[[str], None] | None = None) -> str:
        """Install the engine into tickbench's tools directory (idempotent) and return its
        version. Embedded engines come with tickbench's Python dependencies."""
        return cls.probe()

    @abstractmethod
    def start(self) -> None:
        """Open the engine (connect, or start its server) over ``workdir``."""

    @abstractmethod
    def stop(self) -> None:
        """Close the engine and release everything :meth:`start` acquired."""

    @abstractmethod
    def load(self) -> int:
        """Create the schema of the engine's dataset in the engine's own idiom (types, sort keys,
        partitioning, compression) and load its query data (``params.load_days()``: the paper's
        30-day and multi-exchange days, the market's 20 days and its instruments) from the
        dataset's Parquet files, durably; return the number of rows loaded."""

    @abstractmethod
    def run_query(self, qid: str) -> pa.Table:
        """Run the native query ``qid`` and return its whole result."""

    def settings(self) -> dict[str, Any]:
        """The engine settings that matter for the results (recorded with them)."""
        return {}

    def version(self) -> str:
        """The version of the engine that runs (after :meth:`start`): :meth:`probe`'s, or the
        one an external endpoint's server reports."""
        return self.probe()

    def check_endpoint_only(self) -> None:  # noqa: B027 - optional: only endpoint engines check
        """With an external endpoint: connect, check that it answers and holds no table of
        tickbench's names that tickbench did not create (raise :class:`EngineUnavailable`
        naming them), disconnect; nothing is created or dropped. The runner calls it before
        anything loads. Without one: nothing."""

    def endpoint_info(self) -> dict[str, Any] | None:
        """What results record of an external endpoint (address, the server's own version,
        where tickbench's tables went; never credentials); ``None`` for tickbench's own."""
        return None

    def memory_pids(self) -> list[int]:
        """Processes whose memory a query uses (default: the runner's own, in-process);
        a server engine returns its server's pid."""
        return [os.getpid()]

    def query_text(self, qid: str) -> str:
        return self.info.query_text(qid)

    def query_memory_bytes(self) -> int | None:
        """The memory the last query used as the engine itself reports it (e.g. a query
        log's peak), or ``None`` where it reports none (the runner then measures the process)."""
        return None

    def explain(self, qid: str) -> str | None:
        """The engine's plan of ``qid`` on the loaded store, as its ``EXPLAIN`` prints it (with
        execution figures where the engine gives them, e.g. ``EXPLAIN ANALYZE``), or ``None``
        where the engine has no plan to show. The runner asks once, after the timed
        repetitions (outside the clock), and keeps it in the record: a reader checks that a
        lookup reads one granule or chunk and not the month."""
        return None

    def query_notes(self, qid: str) -> str:
        """What ran where for the last run of ``qid``, when it is not all in the engine
        (e.g. a step done by a client library); empty when it all ran in the engine."""
        return ""

    def pending_visibility(self) -> bool:
        """Whether acknowledged writes are not yet all visible to a new query (an engine
        that applies writes asynchronously, like QuestDB's WAL). It answers at once (one
        query at most), never waits: the runner polls it with its own clock
        (:func:`tickbench.run.visibility.wait_visible`) after :meth:`load`, a bulk load,
        :meth:`set_params` and an ingest store's opening, and raises if the engine reports a
        write it cannot apply. The default is ``False``."""
        return False

    def pending_settle(self) -> bool:
        """Whether the engine still does work, after a call returned, that the runner must
        wait for before it goes on: work on the store it runs in the background once its
        writes are acknowledged and visible, which changes what queries and SE measure (e.g.
        InfluxDB snapshots its cache to TSM files and compacts each shard to one generation).
        Like :meth:`pending_visibility`, it answers at once (one look at the store at most) and
        never waits: the runner polls it with its own clock
        (:func:`tickbench.run.visibility.wait_settled`) after :meth:`load` (inside the load's
        timed interval) and after :meth:`Storage.storage_load`, before
        :meth:`Storage.storage_bytes`. The default is ``False``: nothing left to do once a call
        returns."""
        return False

    def set_params(self, params: RunParams) -> None:
        """Bind new query parameters to the loaded data (the scaling suite rebinds the time
        ranges); an adapter that materialised parameters at load (e.g. a probe-time table)
        writes them again."""
        self.params = params

    def client_decoder(self, qid: str, answer: pa.Table) -> Callable[[], object]:
        """A call that does, with no engine behind it, the decoding this adapter's client does
        to turn the answer of query ``qid`` into its Arrow table, here of ``answer`` (a real
        answer of the query): the market suite's harness ceiling times it in the users' own
        processes, so a cell whose users are bound by their client's decoding is flagged. The
        default reads the answer's Arrow IPC stream (an engine whose client receives Arrow); an
        adapter whose client decodes another wire format (rows, JSON) overrides it with that
        decoding, the encoding done here, before any clock."""
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, answer.schema) as writer:
            writer.write_table(answer)
        buf = sink.getvalue()
        return lambda: pa.ipc.open_stream(buf).read_all()


class BulkLoad(ABC):
    """Capability: W (SPEC §2.1) and M-W (SPEC §2.3), the bulk load of the dataset's bulk-load
    day (the market's day D), under one setting whatever the dataset."""

    def bulk_prepare(self) -> None:  # noqa: B027 - optional: most engines load as they query
        """Before each W (and M-W) load's clock starts: a setting W needs that the query cells do
        not (e.g. a server restarted into a durable commit mode). The default changes nothing."""

    @abstractmethod
    def bulk_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """Load the bulk-load day from ``fmt`` ("csv": ``dataset.csv_file(table)``, or "parquet":
        the day's part files) into a fresh durable store in ``scratch``, built as the query store
        is, through tickbench's load path; return when committed."""

    @abstractmethod
    def baseline_load(self, fmt: str, scratch: Path) -> LoadFigures:
        """The engine's own simplest bulk path on the same files, for comparison with W."""


#: The split every SE and M-SE measurement carries beside its total (:func:`storage_figures`).
STORAGE_SPLIT = ("data_bytes", "index_bytes", "log_bytes")


def storage_figures(total_key: str, data: int, index: int, log: int, **detail: int) -> dict[str, int]:
    """A storage measurement as SE and M-SE record it, the same for every engine: first
    ``total_key``, the SE figure, which is ``data`` + ``index``, what the store keeps to answer
    queries; then the split (:data:`STORAGE_SPLIT`): ``data`` the tables' own files (columns,
    rows, parts, partitions, their metadata and symbol dictionaries), ``index`` the structures
    built beside them for lookups (B-tree indexes, symbol indexes, primary-key marks, series
    indexes), ``log`` the write-ahead log on disk when measured (0 where the engine keeps none;
    not in the total); then the engine's own detail."""
    for name, value in (("data", data), ("index", index), ("log", log)):
        if value < 0:
            raise ValueError(f"storage: {name} bytes {value} < 0")
    return {total_key: data + index, "data_bytes": data, "index_bytes": index, "log_bytes": log, **detail}


class Storage(ABC):
    """Capability: SE, the bytes on disk of the loaded period (SPEC §2.1; M-SE, the market's
    loaded days, SPEC §2.3)."""

    def storage_load(self) -> None:  # noqa: B027 - optional: most engines measure the loaded store
        """SE's preparation, when the store SE measures is not the loaded one (e.g. a fresh
        database holding the 30-day period alone): write it, and return without waiting for
        the engine to settle. The runner calls it, waits while
        :meth:`Engine.pending_visibility` or :meth:`Engine.pending_settle` answers ``True``,
        then calls :meth:`storage_bytes`. The default writes nothing."""

    @abstractmethod
    def storage_bytes(self) -> dict[str, int]:
        """Bytes the engine uses on disk for the loaded period (the paper's 30 days, the market's
        20 days and its instruments), after it has settled, as
        :func:`storage_figures` makes them: the total first (SE's figure), then data, index
        and log bytes, then the engine's own detail."""


class SharedReaders(ABC):
    """Capability: concurrency clients, and the market suite's users, as processes of their own,
    each opening the loaded store beside the others (a read-only open, or a connection to the
    server another process started). Without it, an engine's clients are threads of one process, each with its own
    adapter instance (or, for an in-memory engine, sharing the one that holds the data)."""

    @abstractmethod
    def start_shared(self) -> None:
        """Open the loaded store beside other clients; :meth:`Engine.stop` then releases only
        what this opened."""


class ProcessClients(ABC):
    """Capability: the engine opens its store once per process and no second process may open
    it meanwhile, but within that process any number of clients, each with its own connection,
    run queries concurrently (chDB's session path). The market suite's users are then threads
    of the engine's process, each with a client from :meth:`open_client`."""

    @abstractmethod
    def open_client(self, params: RunParams) -> Engine:
        """A client of the open store for one user: an adapter bound to ``params`` with a
        connection of its own (its ``run_query`` called from one thread; :meth:`Engine.stop`
        closes only that connection)."""


class EngineTime(ABC):
    """Capability: the engine reports each query's own execution time (the server-side time of
    SPEC §3, kept beside the client-side time; what it covers is in the engine's README)."""

    @abstractmethod
    def query_server_ns(self) -> int | None:
        """The last query's execution time as the engine itself reports it, in nanoseconds
        (``None`` when it gave none for that query)."""


class IngestReader(ABC):
    """One user's own reader of an open ingest store (:meth:`Ingest.ingest_reader`): its own
    connection to a server, or its own cursor on an embedded store; used by one thread."""

    @abstractmethod
    def run_query(self, qid: str, params: RunParams) -> pa.Table:
        """Run the native query ``qid`` (``queries/<qid>.<ext>``) bound to ``params`` (a user's
        parameters) over the rows visible now; the whole result."""

    def close(self) -> None:  # noqa: B027 - optional: most readers have nothing to release
        """Release the connection or cursor."""


class IngestCounter(ABC):
    """The visibility counts of an open ingest store as plain data (pickled into the watcher's
    own process): ``count`` as :meth:`Ingest.ingest_count`, over a connection the object opens
    in that process."""

    @abstractmethod
    def count(self, table: str, upto_ns: int) -> int:
        """Rows of ``table`` visible to a new query now with ``ts`` at or before ``upto_ns``."""

    def close(self) -> None:  # noqa: B027 - optional: nothing to close by default
        """Close the connection."""


class Server(ABC):  # noqa: B024 - a capability with nothing to add to Engine's methods
    """Capability: :meth:`Engine.start` launches server processes, which
    :meth:`Engine.memory_pids` names (not the worker's own). The durability suite SIGKILLs
    them; a failed cell checks whether they still run."""


class Ingest(ABC):
    """Capability: an ingest store the suites stream into, for every dataset kind the engine
    serves: the ingest suites on the paper's dataset (tick latency, stream, durability: empty
    ``trades`` and ``book`` tables, writer clients, read-back, the durability settings worth
    comparing) and the market suite's queries during ingest (SPEC §2.3's last paragraph: a store
    built as :meth:`Engine.load` builds the market's, its instruments loaded, quotes and trades
    empty, streamed into while users query it, each with an :class:`IngestReader`). The adapter
    serves each kind with its own part (:func:`by_kind`). An engine without it says why in
    ``engine.toml``'s ``[unsupported]`` under the suite's name (or the cell's)."""

    #: Durability settings worth comparing, name -> what it means (the first is the default,
    #: for every kind: :meth:`durability_setting`).
    ingest_durability: ClassVar[dict[str, str]] = {}
    #: The settings under which the engine promises that no acknowledged row is lost when its
    #: processes are killed (the durability suite asserts it); the others report what they lose.
    ingest_durable: ClassVar[frozenset[str]] = frozenset()
    #: Whether a row is visible to a new query as soon as its write is acknowledged (committed):
    #: the market's during-ingest cell then records "visible on commit" instead of its watcher's
    #: poll latency, and fails if an acknowledged row is not visible at once.
    ingest_visible_on_commit: ClassVar[bool] = False
    #: Why the store's writers and watcher must be threads of the engine's process (an embedded
    #: store no second process may open while this one has it); empty when other processes may
    #: write it (a server). Recorded with every during-ingest cell.
    ingest_one_process: ClassVar[str] = ""

    @abstractmethod
    def ingest_open(self, store: Path, durability: str | None = None) -> None:
        """Open the ingest store at ``store`` for the engine's dataset under ``durability``
        (:meth:`durability_setting`): for the paper's, empty ``trades`` and ``book`` tables
        (created if absent; reopened as they are if present, for recovery checks); for the
        market's, a fresh store with the market schema, its instruments loaded, beside the loaded
        market tables, which stay as they are (a server engine, or one that opens one store per
        process, makes its tables in a database or namespace of their own)."""

    def durability_setting(self, durability: str | None) -> str:
        """``durability``, or the default (the first of :attr:`ingest_durability`); a setting
        the engine does not name is refused, naming the known ones."""
        setting = durability or next(iter(self.ingest_durability), "default")
        if setting not in self.ingest_durability:
            known = ", ".join(self.ingest_durability) or "none"
            raise ValueError(f"unknown durability setting {setting!r}; known: {known}")
        return setting

    def default_setting_only(self, setting: str) -> None:
        """For a store written under the default setting alone (e.g. the market's during-ingest
        store, whose cell asks for no other): refuse another instead of ignoring it."""
        if setting != self.durability_setting(None):
            raise ValueError(f"durability setting {setting!r}: this ingest store runs under the default, "
                             f"{self.durability_setting(None)!r}, alone")

    # What one kind's suites alone call: the paper's ingest suites (ingest_client, ingest_read,
    # ingest_latest) and the market's during-ingest cell (ingest_reader, ingest_counter). An
    # engine whose Ingest serves one kind only leaves the other's as they are here (refusing).

    def ingest_client(self) -> IngestClient:
        """A new writer connection to the open ingest store (the paper's ingest suites)."""
        raise NotImplementedError(f"{type(self).__name__}: no ingest client (the paper's ingest suites')")

    def ingest_read(self, table: str, sym: str) -> pa.Table:
        """Every row of ``sym`` in ``table`` of the ingest store, in time order (the paper's
        ingest suites' read-back)."""
        raise NotImplementedError(f"{type(self).__name__}: no ingest read-back (the paper's ingest suites')")

    @abstractmethod
    def ingest_count(self, table: str, upto_ns: int | None = None) -> int:
        """Rows of ``table`` in the ingest store visible to a new query now (with ``upto_ns``:
        those whose ``ts`` is at or before it, ns since the epoch). Answers at once; never waits."""

    def ingest_latest(self) -> pa.Table:
        """The market snapshot of the paper's ingest store: the latest book row per sym
        (``sym, ts, b1price, a1price``)."""
        raise NotImplementedError(f"{type(self).__name__}: no ingest snapshot (the paper's ingest suites')")

    def ingest_reader(self) -> IngestReader:
        """A new reader of the open store for one user (its own connection, or cursor): the
        market's queries during ingest."""
        raise NotImplementedError(f"{type(self).__name__}: no ingest reader (the market's during-ingest cell's)")

    def ingest_counter(self) -> IngestCounter | None:
        """The open store's counts as plain data, for a watcher in a process of its own; ``None``
        (the default) keeps the watcher a thread of the engine's process."""
        return None

    def ingest_close(self) -> None:  # noqa: B027 - optional: nothing to close by default
        """Close the ingest store (the paper's data stay on disk; the market's store is never
        reopened, and may be dropped)."""

    def ingest_stream_target(self) -> StreamTarget:
        """The streaming path into the open ingest store: the engine's fastest
        (:class:`StreamTarget`; payloads of the dataset's tables, in its Arrow schemas); the
        default sends row tuples through :meth:`ingest_client`."""
        return RowsTarget(self)

    def ingest_bulk(self, table: str, batch: pa.Table) -> None:
        """Append ``batch`` (rows of ``table``, SPEC column order) to the open ingest store
        through the engine's bulk path (the W path's client), returning when acknowledged; the
        stream suite compares streaming with it. The default: the whole batch as one send of
        :meth:`ingest_stream_target` (one binary COPY, one Arrow insert, or one client write)."""
        target = self.ingest_stream_target()
        sender = target.connect()
        try:
            sender.send(target.encode(table, batch))
        finally:
            sender.close()


#: A ``ts`` after every row's (ns since the epoch), for a count of every row.
ALL_TS_NS = 2**62


def upto_all(upto_ns: int | None) -> int:
    """``upto_ns``, or :data:`ALL_TS_NS` when ``None`` (:meth:`Ingest.ingest_count` of every row
    of a store whose counts take a bound)."""
    return ALL_TS_NS if upto_ns is None else upto_ns


def whole_store(upto_ns: int | None) -> None:
    """For an ingest store whose :meth:`Ingest.ingest_count` counts every row (the paper's: its
    suites never ask for fewer), refuse an ``upto_ns`` instead of ignoring it."""
    if upto_ns is not None:
        raise ValueError("this ingest store counts all its rows: upto_ns is the market's during-ingest count")


#: The capability classes, by the name the support matrix and messages use.
CAPABILITIES: dict[str, type] = {"bulk load": BulkLoad, "storage": Storage, "ingest": Ingest,
                                 "engine time": EngineTime, "shared readers": SharedReaders,
                                 "process clients": ProcessClients, "server": Server}


C = TypeVar("C")
P = TypeVar("P")


def by_kind(dataset: Dataset, **parts: P) -> P:
    """An adapter's part for the kind of ``dataset``: ``parts`` names every dataset kind the
    adapter serves and what serves it (``paper=…, market=…``), so a dataset of a kind it does
    not serve is refused, naming those it does, instead of being taken for another."""
    if dataset.kind not in parts:
        raise EngineUnavailable(f"serves the {', '.join(parts)} datasets, not a {dataset.kind} dataset")
    return parts[dataset.kind]


class StoreByKind:
    """For an adapter that serves the paper's and the market's datasets: :meth:`Engine.load`,
    :class:`BulkLoad`'s loads and :class:`Storage`'s bytes, written once, each running the
    adapter's part for its dataset's kind (``_load_paper`` / ``_load_market``, …; only the parts
    of the capabilities the adapter has). First among the adapter's bases, so that these are the
    methods that run."""

    dataset: Dataset
    if TYPE_CHECKING:  # the parts, which the adapter (or its market mixin) defines
        def _load_paper(self) -> int: ...
        def _load_market(self) -> int: ...
        def _bulk_load_paper(self, fmt: str, scratch: Path) -> LoadFigures: ...
        def _bulk_load_market(self, fmt: str, scratch: Path) -> LoadFigures: ...
        def _baseline_load_paper(self, fmt: str, scratch: Path) -> LoadFigures: ...
        def _baseline_load_market(self, fmt: str, scratch: Path) -> LoadFigures: ...
        def _storage_bytes_paper(self) -> dict[str, int]: ...
        def _storage_bytes_market(self) -> dict[str, int]: ...

    def load(self) -> int:
        return by_kind(self.dataset, paper=self._load_paper, market=self._load_market)()

    def bulk_load(self, fmt: str, scratch: Path) -> LoadFigures:
        return by_kind(self.dataset, paper=self._bulk_load_paper, market=self._bulk_load_market)(fmt, scratch)

    def baseline_load(self, fmt: str, scratch: Path) -> LoadFigures:
        return by_kind(self.dataset, paper=self._baseline_load_paper, market=self._baseline_load_market)(fmt, scratch)

    def storage_bytes(self) -> dict[str, int]:
        return by_kind(self.dataset, paper=self._storage_bytes_paper, market=self._storage_bytes_market)()


class IngestByKind:
    """:class:`Ingest`'s store, written once for an adapter that ingests both kinds: each
    method runs the adapter's part for its dataset's kind (``_ingest_open_paper`` /
    ``_ingest_open_market``, …), under one durability setting (:meth:`Ingest.durability_setting`);
    the reader and the counter serve the market's during-ingest cell alone. First among the
    adapter's bases, with :class:`StoreByKind`."""

    dataset: Dataset
    if TYPE_CHECKING:
        def durability_setting(self, durability: str | None) -> str: ...
        def _ingest_open_paper(self, store: Path, durability: str | None = None) -> None: ...
        def _ingest_open_market(self, store: Path, durability: str | None = None) -> None: ...
        def _ingest_stream_target_paper(self) -> StreamTarget: ...
        def _ingest_stream_target_market(self) -> StreamTarget: ...
        def _ingest_count_paper(self, table: str, upto_ns: int | None = None) -> int: ...
        def _ingest_count_market(self, table: str, upto_ns: int | None = None) -> int: ...
        def _ingest_close_paper(self) -> None: ...
        def _ingest_close_market(self) -> None: ...
        def _ingest_reader_market(self) -> IngestReader: ...

    def ingest_open(self, store: Path, durability: str | None = None) -> None:
        setting = self.durability_setting(durability)  # one setting path for every kind
        by_kind(self.dataset, paper=self._ingest_open_paper, market=self._ingest_open_market)(store, setting)

    def ingest_stream_target(self) -> StreamTarget:
        return by_kind(self.dataset, paper=self._ingest_stream_target_paper,
                       market=self._ingest_stream_target_market)()

    def ingest_count(self, table: str, upto_ns: int | None = None) -> int:
        return by_kind(self.dataset, paper=self._ingest_count_paper, market=self._ingest_count_market)(table, upto_ns)

    def ingest_close(self) -> None:
        by_kind(self.dataset, paper=self._ingest_close_paper, market=self._ingest_close_market)()

    def ingest_reader(self) -> IngestReader:
        return by_kind(self.dataset, market=self._ingest_reader_market)()


def capability(adapter: Engine, cap: type[C]) -> C:
    """``adapter`` as its capability ``cap`` (an engine the suite chose by it); a
    :class:`TypeError` naming both when it lacks it."""
    if not isinstance(adapter, cap):
        raise TypeError(f"the {adapter.info.name} engine has no {cap.__name__} capability")
    return adapter


def capability_class(cls: type[Engine], cap: type[C]) -> type[C]:
    """The adapter class ``cls`` as its capability ``cap`` (see :func:`capability`)."""
    if not issubclass(cls, cap):
        raise TypeError(f"{cls.engine_name()} has no {cap.__name__} capability")
    return cls


def capabilities(cls: type[Engine]) -> list[str]:
    """The capabilities ``cls`` has, by name."""
    return [name for name, cap in CAPABILITIES.items() if issubclass(cls, cap)]


def kind_of(cls: type[Engine]) -> str:
    """The kind an engine's capabilities make it: ``server``, ``in-memory`` or ``embedded``."""
    if issubclass(cls, Server):
        return "server"
    return "embedded" if cls.persistent else "in-memory"


def open_shared(adapter: Engine) -> None:
    """Open ``adapter`` beside other clients: :meth:`SharedReaders.start_shared` where it has
    that capability, else a plain :meth:`Engine.start`."""
    if isinstance(adapter, SharedReaders):
        adapter.start_shared()
    else:
        adapter.start()
