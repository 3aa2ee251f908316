"""External endpoints: ``--endpoint ENGINE=HOST:PORT`` and the ``[endpoints.<engine>]`` tables of a
``--config`` TOML file, read into :class:`~tickbench.engines.base.Endpoint` s.

Credentials never come from the command line or the file: the file names the environment
variable that holds a password (``password_env``), and each engine's client also reads its
usual variables (``PGUSER``, ``PGPASSWORD``, ``PGDATABASE`` for PostgreSQL).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from tickbench.engines.base import Endpoint

# What an [endpoints.<engine>] table may hold, with its type.
KEYS: dict[str, type] = {"host": str, "port": int, "user": str, "database": str, "password_env": str,
                         "namespace": str}
# Keys that would put a secret in the file: refused, pointing at password_env.
SECRETS = ("password", "passwd", "token", "secret")
NAMESPACE = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EndpointError(ValueError):
    """A bad --endpoint or --config: the message names the input and what to do."""


def parse_endpoint(text: str, keep: bool = False) -> list[Endpoint]:
    """``ENGINE=HOST:PORT`` (several separated by commas) as endpoints."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        engine, sep, address = item.partition("=")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not engine.strip() or not host.strip():
            raise EndpointError(f"--endpoint {item}: expected ENGINE=HOST:PORT, e.g. questdb=db1:9000")
        out.append(Endpoint(engine=engine.strip(), host=host.strip().strip("[]"),
                            port=_port(port, f"--endpoint {item}"), keep=keep))
    return out


def read_config(path: Path, keep: bool = False) -> list[Endpoint]:
    """The endpoints of a TOML file's ``[endpoints.<engine>]`` tables."""
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as exc:
        raise EndpointError(f"--config {path}: cannot read it ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise EndpointError(f"--config {path}: not valid TOML ({exc})") from None
    unknown = set(raw) - {"endpoints"}
    if unknown:
        raise EndpointError(f"--config {path}: unknown key {', '.join(sorted(unknown))}; it holds [endpoints.<engine>] "
                            "tables only")
    tables = raw.get("endpoints", {})
    if not isinstance(tables, dict) or not tables:
        raise EndpointError(f"--config {path}: no [endpoints.<engine>] table")
    return [_endpoint(path, engine, table, keep) for engine, table in tables.items()]


def _endpoint(path: Path, engine: str, table: Any, keep: bool) -> Endpoint:
    where = f"--config {path}: endpoints.{engine}"
    if not isinstance(table, dict):
        raise EndpointError(f"{where}: expected a table ([endpoints.{engine}]) with host and port")
    for key, value in table.items():
        if any(s in key.lower() for s in SECRETS) and key != "password_env":
            raise EndpointError(f"{where}.{key}: credentials never go in the file; put the password in an "
                                "environment variable and name it with password_env = \"VARIABLE\"")
        if key not in KEYS:
            raise EndpointError(f"{where}.{key}: unknown key; known: {', '.join(KEYS)}")
        if not isinstance(value, KEYS[key]) or isinstance(value, bool):
            raise EndpointError(f"{where}.{key}: expected {KEYS[key].__name__}, got {value!r}")
    for key in ("host", "port"):
        if key not in table:
            raise EndpointError(f"{where}: {key} is missing")
    if "namespace" in table and not NAMESPACE.match(table["namespace"]):
        raise EndpointError(f"{where}.namespace: {table['namespace']!r} must be a lower-case identifier "
                            "([a-z_][a-z0-9_]*, at most 40 characters)")
    if "password_env" in table and not ENV_NAME.match(table["password_env"]):
        raise EndpointError(f"{where}.password_env: {table['password_env']!r} is not an environment variable name")
    return Endpoint(engine=engine, host=table["host"], port=_port(table["port"], f"{where}.port"),
                    user=table.get("user"), database=table.get("database"),
                    password_env=table.get("password_env"), namespace=table.get("namespace"), keep=keep)


def _port(value: Any, where: str) -> int:
    text = str(value).strip()
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise EndpointError(f"{where}: {value!r} is not a TCP port (1-65535)")
    return int(text)


def merge_endpoints(config: list[Endpoint], given: list[Endpoint]) -> dict[str, Endpoint]:
    """The run's endpoints by engine: the file's, then --endpoint's (which set host and port of
    an engine the file also names, keeping its other keys); an engine named twice on the command
    line is refused."""
    out = {e.engine: e for e in config}
    seen: set[str] = set()
    for e in given:
        if e.engine in seen:
            raise EndpointError(f"--endpoint {e.engine}: given twice")
        seen.add(e.engine)
        base = out.get(e.engine)
        out[e.engine] = e if base is None else Endpoint(**{**base.__dict__, "host": e.host, "port": e.port})
    return out
