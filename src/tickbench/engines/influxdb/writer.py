"""InfluxDB's keep-alive HTTP session, and the ingest writer that posts line protocol over one."""

from __future__ import annotations

import contextlib
import http.client
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tickbench.engines.base import IngestClient, StreamSender, StreamTarget, batch_rows
from tickbench.engines.influxdb.lineprotocol import Ties, ingest_lines
from tickbench.engines.server import LOOPBACK


class Session:
    """One keep-alive HTTP connection to influxd, used by one thread at a time. A request that
    fails raises; it is never sent again (http.client reconnects only for the next request)."""

    def __init__(self, port: int, auth: dict[str, str] | None = None) -> None:
        #: ``auth``: headers every request carries (the server's basic authentication).
        self.conn = http.client.HTTPConnection(LOOPBACK, port, timeout=None)
        self.auth = auth or {}

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        try:
            self.conn.request(method, path, body=body, headers={**self.auth, **(headers or {})})
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


class LineSender(StreamSender):
    """A stream writer on a keep-alive connection of its own: a payload is line protocol
    formatted before the clock, one POST to /write, acknowledged by HTTP 204."""

    def __init__(self, session: Session, path: str) -> None:
        self.session, self.path = session, path

    def send(self, payload: Any) -> None:
        status, raw = self.session.request("POST", self.path, payload)
        if status != 204:
            raise RuntimeError(f"InfluxDB write failed ({status}): {raw[:500]!r}")

    def close(self) -> None:
        self.session.close()


class LinePostTarget(StreamTarget):
    """A streaming path of line-protocol payloads, each one POST to ``/write`` of database
    ``db`` over a kept-alive connection of the writer's own; subclasses encode the payloads."""

    def __init__(self, port: int, db: str, auth: dict[str, str] | None = None) -> None:
        self.port, self.auth = port, auth or {}
        self.write_path = f"/write?db={db}&precision=ns"

    def wire_bytes(self, payload: Any) -> bytes:
        data: bytes = payload
        return data

    def connect(self) -> StreamSender:
        return LineSender(Session(self.port, self.auth), self.write_path)

    def connect_sink(self, host: str, port: int) -> StreamSender | None:
        # The sink answers any POST with 204, as /write does: the same sender and payloads.
        return LineSender(Session(port, self.auth), self.write_path)


class LineTarget(LinePostTarget):
    """InfluxDB's streaming path: line protocol formatted before the clock, each payload one
    POST over a kept-alive connection. Writers are threads of the worker: a trade's ``seq``
    tag numbers ties on (exchange, sym, side, ts) across every writer of the store, from the
    one registry (:class:`Ties`) that payloads encoded in separate processes could not share."""

    in_process = True
    path = "line protocol formatted before the clock, one POST /write per payload on kept-alive HTTP, writer threads"

    def __init__(self, port: int, db: str, ties: Ties, auth: dict[str, str] | None = None) -> None:
        super().__init__(port, db, auth)
        self.ties = ties

    def encode(self, table: str, batch: pa.Table) -> Any:
        return ingest_lines(table, batch_rows(batch), self.ties)
