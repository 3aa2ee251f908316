"""InfluxDB's keep-alive HTTP session, and the ingest writer that posts line protocol over one."""

from __future__ import annotations

import contextlib
import http.client
from collections.abc import Sequence
from typing import Any

from tickbench.engines.base import IngestClient
from tickbench.engines.influxdb.lineprotocol import Ties, ingest_lines
from tickbench.engines.server import LOOPBACK


class Session:
    """One keep-alive HTTP connection to influxd, used by one thread at a time. A request that
    fails raises; it is never sent again (http.client reconnects only for the next request)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection(LOOPBACK, port, timeout=None)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        try:
            self.conn.request(method, path, body=body, headers=headers or {})
            resp = self.conn.getresponse()
            return resp.status, resp.read()
        except BaseException:
            self.conn.close()  # a half-read response must not be taken for the next one's
            raise

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


class Writer(IngestClient):
    """One writer: each write is one POST of line protocol to /write, acknowledged by HTTP 204
    once every point is in the cache and its WAL entry fsynced."""

    def __init__(self, session: Session, db: str, ties: Ties) -> None:
        self.session, self.ties = session, ties
        self.path = f"/write?db={db}&precision=ns"

    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        if not rows:
            return
        status, raw = self.session.request("POST", self.path, ingest_lines(table, rows, self.ties))
        if status != 204:
            raise RuntimeError(f"InfluxDB write failed ({status}): {raw[:500]!r}")

    def close(self) -> None:
        self.session.close()
