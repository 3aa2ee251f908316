"""Building and installing the TimescaleDB extension for Debian's PostgreSQL 15 from the
official source release (no package registry here carries it).

``tickbench install timescaledb --source PATH`` (or ``$TICKBENCH_TIMESCALEDB_SOURCE``):

1. the tarball is checked against ``PATH.sha256`` when that file is beside it, and refused on
   a mismatch;
2. nothing more to do when the extension's control file under ``pg_config --sharedir``
   already names the tarball's version and its library is under ``pg_config --pkglibdir``
   (what ``pg_available_extensions`` lists, read without a running server);
3. the build needs (``postgresql-server-dev-15 cmake libssl-dev``, and PostgreSQL itself)
   come from apt when missing (root);
4. it is unpacked into ``<tools>/timescaledb/timescaledb-<version>/`` (kept: a second build of
   the same tarball reuses the tree), configured with the release's ``bootstrap`` (Release,
   no regression/TAP checks), built with ``make`` and installed into PostgreSQL's directories;
   every command's output goes to ``<tools>/timescaledb/build.log``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

from tickbench.engines.base import EngineUnavailable
from tickbench.engines.server import tools_dir

PG_MAJOR = "15"
SOURCE_ENV = "TICKBENCH_TIMESCALEDB_SOURCE"
BUILD_PACKAGES = (f"postgresql-server-dev-{PG_MAJOR}", "cmake", "libssl-dev", "gcc", "make")
BOOTSTRAP_FLAGS = ("-DREGRESS_CHECKS=OFF", "-DTAP_CHECKS=OFF", "-DWARNINGS_AS_ERRORS=OFF",
                   "-DLINTER=OFF", "-DCMAKE_BUILD_TYPE=Release")
SOURCE_MARKER = ".tickbench-source-sha256"  # in an unpacked tree: the tarball it came from
VERSION_LINE = re.compile(r"^\s*version\s*=\s*(\S+)", re.MULTILINE)
DEFAULT_VERSION = re.compile(r"^\s*default_version\s*=\s*'([^']+)'", re.MULTILINE)
ENABLE = (f"tickbench install timescaledb --source timescaledb-<version>.tar.gz (or {SOURCE_ENV}=PATH): "
          f"builds the official TimescaleDB source release for PostgreSQL {PG_MAJOR}; needs root")

Progress = Callable[[str], None]


def _pg_config(flag: str, fallback: str) -> Path:
    """A directory from PostgreSQL 15's ``pg_config`` (Debian's layout when it is absent)."""
    exe = Path(f"/usr/lib/postgresql/{PG_MAJOR}/bin/pg_config")
    if os.access(exe, os.X_OK):
        done = subprocess.run([str(exe), flag], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip())
    return Path(fallback)


def share_dir() -> Path:
    return _pg_config("--sharedir", f"/usr/share/postgresql/{PG_MAJOR}")


def pkglib_dir() -> Path:
    return _pg_config("--pkglibdir", f"/usr/lib/postgresql/{PG_MAJOR}/lib")


def installed_version() -> str | None:
    """The TimescaleDB version installed for PostgreSQL 15 (the control file's
    ``default_version`` whose versioned library is present), or ``None``."""
    control = share_dir() / "extension" / "timescaledb.control"
    try:
        m = DEFAULT_VERSION.search(control.read_text())
    except OSError:
        return None
    if m is None or not (pkglib_dir() / f"timescaledb-{m.group(1)}.so").is_file():
        return None
    return m.group(1)


def build_dir() -> Path:
    return tools_dir() / "timescaledb"


def build_log() -> Path:
    return build_dir() / "build.log"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def verify_checksum(tarball: Path) -> str:
    """The tarball's sha256; when ``<tarball>.sha256`` is beside it, it must name the same
    digest (``sha256sum`` format), else the tarball is refused."""
    digest = sha256_of(tarball)
    expected_file = tarball.with_name(tarball.name + ".sha256")
    if expected_file.is_file():
        fields = expected_file.read_text().split()
        expected = fields[0].lower() if fields else ""
        if expected != digest:
            raise EngineUnavailable(
                f"checksum mismatch: {tarball} has sha256 {digest}, but {expected_file} says "
                f"{expected or '(nothing)'}; the tarball is corrupt or not the release it claims to be, "
                "so it is not built")
    return digest


def tarball_version(tarball: Path) -> str:
    """The release's version from its top-level ``version.config`` (``version = 2.28.3``)."""
    try:
        with tarfile.open(tarball, "r:gz") as tar:
            for member in tar:
                parts = member.name.strip("/").split("/")
                if len(parts) == 2 and parts[1] == "version.config" and member.isfile():
                    f = tar.extractfile(member)
                    m = VERSION_LINE.search(f.read().decode()) if f else None
                    if m:
                        return m.group(1)
                    break
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise EngineUnavailable(f"{tarball} is not a readable .tar.gz: {exc}") from exc
    raise EngineUnavailable(f"{tarball} holds no <dir>/version.config: not a TimescaleDB source release")


def resolve_source(source: Path | None) -> Path | None:
    """``source``, else ``$TICKBENCH_TIMESCALEDB_SOURCE``, else ``None``; a named path must exist."""
    if source is None:
        raw = os.environ.get(SOURCE_ENV, "").strip()
        source = Path(raw) if raw else None
    if source is not None and not source.is_file():
        raise EngineUnavailable(f"TimescaleDB source {source} is not a file")
    return source.resolve() if source is not None else None


def _missing_packages() -> list[str]:
    missing = []
    for pkg in BUILD_PACKAGES:
        done = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
        if done.returncode != 0 or "install ok installed" not in done.stdout:
            missing.append(pkg)
    return missing


def _run(cmd: list[str], log: Path, progress: Progress | None, cwd: Path | None = None,
         env: dict[str, str] | None = None) -> None:
    """``cmd`` with its output appended to ``log``; a failure names the log and its tail."""
    if progress:
        progress(" ".join(cmd))
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        done = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise EngineUnavailable(f"`{' '.join(cmd)}` failed (status {done.returncode}); build log {log}:\n{tail}")


def _install_packages(missing: list[str], log: Path, progress: Progress | None) -> None:
    if shutil.which("apt-get") is None:
        raise EngineUnavailable(f"the build needs {' '.join(missing)} and there is no apt-get to install them")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    known = subprocess.run(["apt-cache", "show", *missing], capture_output=True, env={**os.environ, **env})
    if known.returncode != 0:
        _run(["apt-get", "update"], log, progress, env=env)
    _run(["apt-get", "install", "-y", "--no-install-recommends", *missing], log, progress, env=env)


def _unpack(tarball: Path, digest: str, dest_parent: Path, version: str, progress: Progress | None) -> Path:
    """The unpacked source tree ``dest_parent/timescaledb-<version>``, reused when it came from
    the same tarball (its marker names the digest), else unpacked afresh."""
    tree = dest_parent / f"timescaledb-{version}"
    marker = tree / SOURCE_MARKER
    if marker.is_file() and marker.read_text().strip() == digest:
        if progress:
            progress(f"reusing the unpacked source {tree}")
        return tree
    if tree.exists():
        shutil.rmtree(tree)
    if progress:
        progress(f"unpacking {tarball.name} into {dest_parent}")
    staging = dest_parent / f".unpack-{version}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    with tarfile.open(tarball, "r:gz") as tar:
        tar.extractall(staging, filter="data")  # no absolute paths, links out or devices
    tops = list(staging.iterdir())
    if len(tops) != 1 or not tops[0].is_dir():
        raise EngineUnavailable(f"{tarball}: expected one top-level directory, found {len(tops)} entries")
    tops[0].rename(tree)
    staging.rmdir()
    marker.write_text(digest + "\n")
    return tree


def install(source: Path | None, progress: Progress | None = None) -> str:
    """Build and install TimescaleDB from the source release ``source`` (or
    ``$TICKBENCH_TIMESCALEDB_SOURCE``) for PostgreSQL 15; return the installed version. A
    no-op when that version is installed already; without a source, the installed version,
    or :class:`EngineUnavailable` saying how to enable it."""
    tarball = resolve_source(source)
    current = installed_version()
    if tarball is None:
        if current is not None:
            return current
        raise EngineUnavailable(f"no TimescaleDB source given; {ENABLE}")
    if progress:
        progress(f"verifying {tarball.name}")
    # Before anything else: a corrupt or substituted tarball is refused even when the version
    # it claims is installed already.
    digest = verify_checksum(tarball)
    version = tarball_version(tarball)
    if current == version:
        if progress:
            progress(f"TimescaleDB {version} is installed already")
        return current
    if os.geteuid() != 0:
        raise EngineUnavailable("installing TimescaleDB writes into PostgreSQL's system directories: run as root")
    work = build_dir()
    work.mkdir(parents=True, exist_ok=True)
    log = build_log()
    log.write_text(f"TimescaleDB {version} from {tarball} (sha256 {digest})\n")
    missing = _missing_packages()
    if missing:
        _install_packages(missing, log, progress)
    if not os.access(f"/usr/lib/postgresql/{PG_MAJOR}/bin/postgres", os.X_OK):
        _install_packages([f"postgresql-{PG_MAJOR}"], log, progress)
    tree = _unpack(tarball, digest, work, version, progress)
    # The build finds PostgreSQL 15 through its pg_config, not whichever one is first on PATH.
    pg_config = f"-DPG_CONFIG=/usr/lib/postgresql/{PG_MAJOR}/bin/pg_config"
    if not (tree / "build" / "CMakeCache.txt").is_file():
        # BUILD_FORCE_REMOVE: a build/ left by an interrupted configure is remade, not asked about.
        _run(["./bootstrap", *BOOTSTRAP_FLAGS, pg_config], log, progress, cwd=tree,
             env={"BUILD_FORCE_REMOVE": "true"})
    _run(["make", "-C", "build", f"-j{os.cpu_count() or 1}"], log, progress, cwd=tree)
    _run(["make", "-C", "build", "install"], log, progress, cwd=tree)
    got = installed_version()
    if got != version:
        raise EngineUnavailable(f"the build finished but PostgreSQL {PG_MAJOR} lists TimescaleDB {got}, "
                                f"not {version}; build log {log}")
    if progress:
        progress(f"installed TimescaleDB {version}; build log {log}")
    return version
