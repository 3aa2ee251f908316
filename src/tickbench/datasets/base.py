"""What a dataset kind is, and how tickbench finds them.

A dataset kind (``--dataset paper``, ``--dataset market``) is a plug-in: one folder of
:mod:`tickbench.datasets` (or of a package named in ``$TICKBENCH_DATASET_PACKAGES``) whose
``kind.py`` defines ``KIND``, an object of the :class:`DatasetKind` protocol. The folder holds
everything particular to the kind: its calendar, generator, schema, validation, parameters,
reference implementation and its spec (:class:`KindSpec`). Everything every kind shares (the
manifest, the content hash, file naming, the generation machinery, the partition reader, the
importers) is :mod:`tickbench.data`'s. Code outside a kind's folder does not compare a dataset's
kind with one it knows: it calls the kind object (:func:`kind`, :func:`kind_of`), and an engine
names the kinds it serves (:func:`tickbench.engines.base.by_kind`).

A dataset's manifest names its kind (``kind``; a manifest without one is the paper's, the only
kind there was when that field came).
"""

from __future__ import annotations

import errno
import importlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import polars as pl
import pyarrow as pa

from tickbench.data.cluster import ClusterError, check_address
from tickbench.data.dataset import (
    DEFAULT_KIND,
    MANIFEST,
    ContentCheck,
    Dataset,
    DatasetError,
    Manifest,
    ProgressFn,
    check_manifest,
    check_scale,
    check_seed,
    claim_stage,
    dataset_lock,
    publish_stage,
    remove_abandoned_stages,
    shown,
    stopping_on_signals,
    verify_files,
)
from tickbench.data.violations import DEFAULT_SAMPLES, ValidationReport

if TYPE_CHECKING:
    from tickbench.data.importers import ImportResult
    from tickbench.data.importers.common import ReaderOptions

PACKAGES_ENV = "TICKBENCH_DATASET_PACKAGES"


class RunParams(Protocol):
    """A run's concrete parameters on a dataset (each kind has its own class): what the engines'
    query files bind, and their plain-data form for the engine processes."""

    def bindings(self) -> dict[str, Any]:
        """The named parameters query files bind (``$name``)."""
        ...

    def as_dict(self) -> dict[str, Any]:
        """Plain data; the kind's :meth:`DatasetKind.params_from_dict` reads it back."""
        ...

    def days(self, span: str) -> list[str]:
        """The ISO days of one of the kind's spans."""
        ...

    def load_days(self) -> list[str]:
        """The ISO days an engine loads for the kind's queries, in date order."""
        ...


@dataclass(frozen=True)
class KindSpec:
    """What a kind's queries answer: their ids, each answer's columns and types (where the kind
    fixes them), the order an answer is compared in (where it is fixed), and the tolerances of the
    comparison (:mod:`tickbench.verify`)."""

    queries: tuple[str, ...]
    #: Each answer's column names (a mapping of name to Polars type where the kind fixes types).
    columns: Mapping[str, Iterable[str]] = field(default_factory=dict)
    sort: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rel_tol: float = 1e-6
    abs_floor: float = 1e-12


class DatasetKind(Protocol):
    """One kind of dataset: what it holds, how it is generated and checked, and what a run on it
    binds and compares with. A kind's object is stateless; ``KIND`` in its folder's ``kind.py``."""

    #: The ``--dataset`` value, the manifest's ``kind`` and the suites' ``dataset_kind``.
    name: str
    #: One line for ``tickbench generate --help``.
    title: str
    #: Each table's Arrow schema (those partitioned by day and those that are not).
    schemas: Mapping[str, pa.Schema]
    #: The tables partitioned by day, in the order they are generated.
    tables: tuple[str, ...]
    #: The sizing options of ``tickbench generate`` it takes (``symbols``, ``universe``).
    options: tuple[str, ...]
    #: Bumped when the kind's generator's output changes (CHANGELOG.md says why).
    generator_version: str
    #: Its queries' ids, answer columns, sort order and tolerances.
    spec: KindSpec

    def check_options(self, symbols: int, universe: int | None) -> tuple[int, int | None]:
        """``--symbols`` and ``--universe`` as this kind takes them (a default filled in);
        DatasetError naming an option that does not belong to it or is out of range."""
        ...

    def default_dir(self, scale: float, seed: int, symbols: int, universe: int | None) -> Path:
        """Where ``tickbench generate`` and ``tickbench run`` put this kind's dataset by default."""
        ...

    def describe(self, manifest: Manifest) -> str:
        """One line saying what a dataset of this kind holds (after ``dataset DIR:``)."""
        ...

    def size_text(self, manifest: Manifest) -> str:
        """The option that sized a dataset, as text (``symbols 2``, ``universe 1000``)."""
        ...

    def generate_into(self, stage: Path, scale: float, seed: int, symbols: int, universe: int | None, jobs: int,
                      progress: ProgressFn | None, cluster: str | None) -> Manifest:
        """Generate the dataset into the staging directory ``stage`` (its manifest last)."""
        ...

    def check_manifest(self, where: Path, m: Manifest, fix: str) -> None:
        """Refuse (DatasetError naming the field) a manifest whose kind-specific fields are not what
        this tickbench writes; ``where`` is the manifest, ``fix`` what to do."""
        ...

    def expected_params(self, m: Manifest) -> dict[str, Any]:
        """The benchmark parameters a dataset's data determine (its manifest's ``params`` must be these)."""
        ...

    def content_check(self, directory: Path, m: Manifest) -> ContentCheck | None:
        """What only the data can check (told each partition as its rows are read and hashed,
        then asked), or None when the content hash is all."""
        ...

    def validate(self, directory: Path, manifest: Manifest, max_samples: int) -> ValidationReport:
        """Every row and file against the kind's invariants (bad rows reported, not raised)."""
        ...

    def params(self, dataset: Dataset, seed: int) -> RunParams:
        """The run's parameters on ``dataset`` from the run's seed."""
        ...

    def params_from_dict(self, raw: dict[str, Any]) -> RunParams:
        """Parameters back from their ``as_dict()`` form."""
        ...

    def answer(self, qid: str, dataset: Dataset, params: RunParams) -> pl.DataFrame:
        """The reference answer of query ``qid``."""
        ...

    def import_into(self, fmt: str, paths: list[Path], out: Path, stage: Path, opts: ReaderOptions, limit: int,
                    sample: int | None, trade_ids: str) -> ImportResult:
        """Write imported files (``paths``, read by format ``fmt``'s reader, which declared that
        they make this kind) as a dataset of this kind into ``stage``, every row checked with the
        kind's invariants, then rename it into ``out``
        (:data:`tickbench.data.importers.ImportWriter`). A kind no importer makes need not have it."""
        ...


def _roots() -> list[tuple[str, Path]]:
    """(package, folder) of every place kinds are looked for, tickbench's own first."""
    names = ["tickbench.datasets", *(p.strip() for p in os.environ.get(PACKAGES_ENV, "").split(",") if p.strip())]
    out: list[tuple[str, Path]] = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise DatasetError(f"${PACKAGES_ENV} names {name}, which cannot be imported ({exc})") from None
        out += [(name, Path(path)) for path in getattr(module, "__path__", [])]
    return out


@cache
def kinds() -> dict[str, DatasetKind]:
    """Every dataset kind, by name: each folder holding a ``kind.py`` that defines ``KIND``,
    tickbench's own first (``paper`` first of all: the default)."""
    found: dict[str, DatasetKind] = {}
    for package, root in _roots():
        for d in sorted(root.iterdir()):
            if d.is_dir() and (d / "kind.py").is_file():
                kind_ = getattr(importlib.import_module(f"{package}.{d.name}.kind"), "KIND", None)
                if kind_ is not None and kind_.name not in found:
                    found[kind_.name] = kind_
    first = {DEFAULT_KIND: found.pop(DEFAULT_KIND)} if DEFAULT_KIND in found else {}
    return {**first, **found}


def kind(name: str) -> DatasetKind:
    """The kind ``name``; DatasetError naming the known ones when there is none."""
    known = kinds()
    if name not in known:
        raise DatasetError(f"--dataset {name}: must be one of {', '.join(known)}")
    return known[name]


def import_dataset(fmt: str, paths: list[Path], out: Path, **options: Any) -> ImportResult:
    """``tickbench import``: ``paths`` (files in format ``fmt``) as a dataset at ``out``. The
    format's reader declares which kind its files make; that kind writes them
    (:meth:`DatasetKind.import_into`) through :func:`tickbench.data.importers.import_dataset`'s
    checks and staging. ``options``: that function's (policy, sample, memory limit, clock, …)."""
    from tickbench.data import importers  # loaded only for an import

    paths = [Path(p) for p in paths]
    made = kind(importers.produced_kind(fmt, paths))
    return importers.import_dataset(fmt, paths, out, made.import_into, **options)


def kind_of(dataset: Dataset) -> DatasetKind:
    """The kind of an opened dataset."""
    return kind(dataset.manifest.kind)


def params_for(dataset: Dataset, seed: int) -> RunParams:
    """The run's parameters on ``dataset`` (its kind's, from the run's seed)."""
    return kind_of(dataset).params(dataset, seed)


def params_from_dict(raw: dict[str, Any]) -> RunParams:
    """Parameters back from ``as_dict()`` (a market's says its kind; the paper's form never did)."""
    return kind(str(raw.get("kind", DEFAULT_KIND))).params_from_dict(raw)


class ReferenceAnswers:
    """A run's reference answers by query id (for one set of parameters: a user's own, in a
    multi-user cell), computed once and shared by every engine."""

    def __init__(self, dataset: Dataset, params: RunParams) -> None:
        self.ds = dataset
        self.params = params
        self.kind = kind_of(dataset)
        self.cache: dict[str, pl.DataFrame] = {}

    def __getitem__(self, qid: str) -> pl.DataFrame:
        if qid not in self.cache:
            self.cache[qid] = self.kind.answer(qid, self.ds, self.params)
        return self.cache[qid]


def _expected_params(k: DatasetKind) -> Callable[[Manifest], dict[str, Any]]:
    def expected(m: Manifest) -> dict[str, Any]:
        if m.source != "generated" and not (isinstance(m.source, str) and m.source.startswith("import:")):
            raise DatasetError(f"dataset source {shown(m.source)}: unknown to this tickbench (generated or "
                               "import:FORMAT)")
        return k.expected_params(m)
    return expected


def read_manifest(directory: Path) -> tuple[Manifest, DatasetKind]:
    """The manifest of ``directory`` and its kind, every entry checked (the shared layout's rules,
    then its kind's, then its parameters against those its data determine)."""
    m = Manifest.read(directory)
    known = kinds()
    if m.kind not in known:
        raise DatasetError(f"{directory / MANIFEST}: dataset kind {shown(m.kind)} is not one of {', '.join(known)}")
    k = known[m.kind]
    check_manifest(directory, m, k.tables, k.check_manifest, _expected_params(k))
    return m, k


def open_dataset(directory: Path, verify_content: bool = False) -> Dataset:
    """The dataset in ``directory``, checked: its manifest, every file's presence and size (and,
    with ``verify_content``, every partition's rows against its hash, and what its kind checks
    of them)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DatasetError(f"--data {directory}: no such directory")
    manifest, k = read_manifest(directory)
    verify_files(directory, manifest, k.schemas, content=verify_content,
                 check=k.content_check(directory, manifest) if verify_content else None)
    return Dataset(directory, manifest, k.schemas)


def validate(directory: Path, max_samples: int = DEFAULT_SAMPLES) -> ValidationReport:
    """Check every partition of the dataset in ``directory`` against its kind's invariants (SPEC
    §1, §1.3) and its manifest's hashes. Raises :class:`DatasetError` when the directory cannot be
    read as a dataset (no manifest, a missing or unreadable file); bad rows are reported, not raised."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DatasetError(f"{directory}: no such directory")
    manifest, k = read_manifest(directory)
    return k.validate(directory, manifest, max_samples)


def generate(
    out: Path,
    scale: float,
    seed: int,
    symbols: int = 0,
    jobs: int = 1,
    progress: ProgressFn | None = None,
    cluster: str | None = None,
    dataset: str = DEFAULT_KIND,
    universe: int | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Manifest:
    """Generate the dataset of kind ``dataset`` into ``out`` and return its manifest.

    ``symbols`` and ``universe`` size it as its kind takes them (the paper's ``symbols`` extra
    instruments, SPEC §1.1; the market's ``universe`` instruments, default 1,000, §1.3). The
    partitions run in ``jobs`` local worker processes, or, with ``cluster`` (a Dask scheduler
    address, or ``local:N``), as tasks on a Dask cluster whose workers all see ``out``'s parent
    directory (see :mod:`tickbench.data.cluster`); the files and the content hash are the same.

    The files are written into a staging directory beside ``out`` and moved into place only
    when every partition and the manifest are complete: an interrupted or failed run leaves
    nothing half-written. An ``out`` that already holds the same dataset is reused as is; one
    that holds anything else is refused. A generation or import writing into ``out`` holds its
    lock (:func:`tickbench.data.dataset.dataset_lock`): this one waits for it (``on_wait`` is
    told who holds it), then reuses what it made. SIGTERM and SIGHUP stop it as Ctrl-C does
    (:class:`tickbench.data.dataset.GenerationStopped`): its workers are killed (they die with
    it in any case, ``kill -9`` included) and nothing is kept.
    """
    check_scale(scale)
    check_seed(seed)
    k = kind(dataset)
    symbols, universe = k.check_options(symbols, universe)
    if jobs < 1:
        raise DatasetError(f"--jobs {jobs}: must be at least 1")
    if cluster is not None:
        if jobs != 1:
            raise DatasetError(f"--jobs {jobs} and --cluster {cluster} together; the cluster's workers do "
                               "the work: give one or the other")
        try:
            check_address(cluster)
        except ClusterError as exc:
            raise DatasetError(str(exc)) from None
    out = Path(out)
    with dataset_lock(out, "generating", wait=True, on_wait=on_wait), stopping_on_signals():
        return _generate_locked(out, scale, seed, symbols, jobs, progress, cluster, k, universe)


def _generate_locked(out: Path, scale: float, seed: int, symbols: int, jobs: int, progress: ProgressFn | None,
                     cluster: str | None, k: DatasetKind, universe: int | None) -> Manifest:
    if out.exists():
        if not out.is_dir():
            raise DatasetError(f"--out {out}: exists and is not a directory")
        if (out / MANIFEST).exists():
            existing, existing_kind = read_manifest(out)
            if (existing.kind, existing.scale, existing.seed, existing.symbols, existing.universe) == (
                k.name, scale, seed, symbols, universe
            ) and existing.generator_version == k.generator_version:
                verify_files(out, existing, k.schemas)
                return existing
            raise DatasetError(
                f"--out {out}: holds a different dataset ({existing.kind}, scale {existing.scale}, seed "
                f"{existing.seed}, {existing_kind.size_text(existing)}); choose another directory or remove it"
            )
        if any(out.iterdir()):
            raise DatasetError(f"--out {out}: not empty and not a tickbench dataset; choose an "
                               "empty or new directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned_stages(out)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    claim_stage(stage)
    try:
        manifest = k.generate_into(stage, scale, seed, symbols, universe, jobs, progress, cluster)
        publish_stage(stage, out)
        return manifest
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DatasetError(f"--out {out}: the disk filled up while generating; nothing was kept. "
                               f"Free space on {out.parent} or choose a smaller --scale") from exc
        raise
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
