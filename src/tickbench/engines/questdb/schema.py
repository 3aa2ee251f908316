"""QuestDB's text: the tables of ``schema.sql``, their /imp schemas and ILP row layout, and
query files with their parameters written in (QuestDB's HTTP endpoints take no bind variables)."""

from __future__ import annotations

import datetime as dt
import functools
import re
import urllib.parse
from pathlib import Path
from typing import Any

from tickbench.datasets.paper.schema import SCHEMAS, TABLES

SYMBOLS = {"trades": ["exchange", "sym", "side"], "book": ["exchange", "sym"]}
PARAM = re.compile(r"\$([a-z][a-z0-9]*(?:_[a-z][a-z0-9]*)*(?:_[0-9]+)?)")
CREATE = re.compile(r"CREATE TABLE (\w+)")
COLUMN = re.compile(r"^\s+(\w+) (TIMESTAMP_NS|SYMBOL|DOUBLE|LONG)\b", re.MULTILINE)
# The ingest store's tables, in the server's one namespace beside the loaded ones (QuestDB has
# no databases or schemas): schema.sql's columns under other names.
INGEST = {t: f"ingest_{t}" for t in TABLES}
# The CSV's `2022-06-01 00:00:06.737770000Z`: /imp cannot detect this format by itself.
TS_PATTERN = "yyyy-MM-dd HH:mm:ss.SSSUUUNNNz"


def _schema() -> dict[str, str]:
    """The CREATE TABLE statements of ``schema.sql``, by table name."""
    text = "\n".join(line for line in (Path(__file__).parent / "schema.sql").read_text().splitlines()
                     if not line.lstrip().startswith("--"))
    out: dict[str, str] = {}
    for stmt in filter(None, (s.strip() for s in text.split(";"))):
        match = CREATE.search(stmt)
        if match:
            out[match.group(1)] = stmt
    return out


SCHEMA = _schema()


def imp_schema(table: str) -> list[dict[str, str]]:
    """The /imp ``schema`` of ``table``: every column with its type in schema.sql (so that
    nothing depends on type detection), and the CSV's timestamp format."""
    out = []
    for name, kind in COLUMN.findall(SCHEMA[table]):
        column = {"name": name, "type": kind}
        if kind == "TIMESTAMP_NS":
            column["pattern"] = TS_PATTERN
        out.append(column)
    return out


# ``<<name: part>>``: ``part`` once per item of the list binding ``name``, joined by commas.
REPEAT = re.compile(r"<<([a-z][a-z0-9_]*):(.*?)>>", re.S)


def _literal(value: Any, name: str) -> str:
    """The QuestDB SQL literal of one bound value (see :func:`bind`)."""
    if isinstance(value, list):
        return ", ".join(_literal(v, name) for v in value) or "NULL"
    if isinstance(value, dt.datetime):
        return "'" + value.strftime("%Y-%m-%dT%H:%M:%S.%fZ") + "'"
    if isinstance(value, dt.date):
        return "'" + value.isoformat() + "'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(int(value))
    raise TypeError(f"${name}: no QuestDB literal for {type(value).__name__}")


def bind(sql: str, bindings: dict[str, Any]) -> str:
    """Substitute each ``$name`` in a query file with the SQL literal of ``bindings[name]``.

    QuestDB's HTTP endpoints take no bind variables, so the run's parameters are written into
    the text: a datetime as an ISO-8601 UTC timestamp string (QuestDB compares it with a
    timestamp column, and uses it for interval scans), a date as its ISO text, a string quoted
    with ``'`` doubled (QuestDB's only escape: a backslash is an ordinary character), an int as
    its digits; ``$name`` of a list is its items' literals joined by commas (for ``IN (…)``;
    ``NULL`` when empty, which matches nothing), and ``$name_N`` is item N of the list.

    ``<<name: part>>`` repeats ``part`` for each item of the list ``bindings[name]``, joined by
    commas, with ``$item`` as the item's literal and ``@i`` as its position (0, 1, …: for the
    names of columns made per item, which thus never come from data) — a pivot over the
    dataset's venues, which QuestDB cannot pivot by itself.
    """
    return bind_form(sql, bindings)[0]


def bind_form(sql: str, bindings: dict[str, Any]) -> tuple[str, str]:
    """:func:`bind`'s text, and the same text URL-encoded as a form value (``quote_plus``):
    what ``/exec?query=…`` sends. The file's text between parameters is split and encoded once
    per text (:func:`_template`), so a repetition encodes only its bound values."""
    if "<<" in sql:
        def repeat(match: re.Match[str]) -> str:
            items = bindings[match.group(1)]
            if not isinstance(items, list) or not items:
                raise ValueError(f"<<{match.group(1)}: …>> needs a non-empty list binding")
            return ", ".join(match.group(2).strip().replace("$item", _literal(v, match.group(1)))
                             .replace("@i", str(i)) for i, v in enumerate(items))

        sql = REPEAT.sub(repeat, sql)
    texts, quoted, names = _template(sql)
    plain, form = [texts[0]], [quoted[0]]
    for name, text, encoded in zip(names, texts[1:], quoted[1:], strict=True):
        value = _literal(_bound(bindings, name), name)
        plain += (value, text)
        form += (urllib.parse.quote_plus(value), encoded)
    return "".join(plain), "".join(form)


@functools.lru_cache(maxsize=256)
def _template(sql: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``sql`` split at its ``$name``s: the texts around them, the same URL-encoded, the names."""
    parts = PARAM.split(sql)  # text, name, text, …, text (PARAM has one capturing group)
    texts = tuple(parts[0::2])
    return texts, tuple(urllib.parse.quote_plus(t) for t in texts), tuple(parts[1::2])


def _bound(bindings: dict[str, Any], name: str) -> Any:
    """``bindings[name]``, or item N of the list ``bindings[base]`` for ``base_N`` (an item
    before a binding of the same name, as a list's items are named after it)."""
    base, _, index = name.rpartition("_")
    if index.isdigit() and isinstance(bindings.get(base), list):
        return bindings[base][int(index)]
    if name not in bindings:
        raise KeyError(name)
    return bindings[name]


def _row_layout(table: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(index, name) of ``table``'s SYMBOL columns and of its other columns after ``ts``, in
    the SPEC row tuple."""
    names = SCHEMAS[table].names
    symbols = [(i, n) for i, n in enumerate(names) if n in SYMBOLS[table]]
    columns = [(i, n) for i, n in enumerate(names) if i and n not in SYMBOLS[table]]
    return symbols, columns


ROW_LAYOUT = {t: _row_layout(t) for t in TABLES}
