"""The market manifest's own checks (SPEC §1.3): the fields that change a run, each against what
its data (and, generated, the generator) determine."""

from __future__ import annotations

from pathlib import Path

from tickbench.data.dataset import MANIFEST, MANIFEST_FIX, DatasetError, Manifest, hash_table, shown
from tickbench.datasets.market import calendar as mc
from tickbench.datasets.market.generator import generate_block
from tickbench.datasets.market.schema import INSTRUMENTS_PATH, MARKET_TABLES

MARKET_GENERATOR_VERSION = "1"  # bump when the market generator's output changes (see CHANGELOG.md)


def check_market_manifest(where: Path, m: Manifest, fix: str) -> None:
    """A market manifest's fields that change a run, each checked against what its data (and,
    generated, the generator) determine; a refusal names the field. What cannot be checked
    here (rows, venues, scale, seed: they need the data) :func:`check_market_data` checks."""
    try:
        calendar = mc.calendar_of(m.calendar)
    except ValueError as exc:
        raise DatasetError(f"{where}: its calendar: {exc}; {fix}") from None
    if m.symbols != 0:
        raise DatasetError(f"{where}: symbols {shown(m.symbols)}: a market dataset has none (0); {fix}")
    generated = m.source == "generated"
    if generated and m.calendar != mc.calendar_dict():
        raw = m.calendar or {}
        wrong = [k for k in ("days", "session", "venues") if raw.get(k) != mc.calendar_dict()[k]] or ["keys"]
        raise DatasetError(f"{where}: calendar.{wrong[0]} is not the generated calendar's, which a generated "
                           f"dataset has; {fix}")
    if not generated and (m.scale != 1.0 or m.seed != 0):
        field_ = "scale" if m.scale != 1.0 else "seed"
        raise DatasetError(f"{where}: {field_} {shown(getattr(m, field_))}: an imported dataset's is "
                           f"{'1' if field_ == 'scale' else '0'}; {fix}")
    if isinstance(m.universe, bool) or not isinstance(m.universe, int) or m.universe < 1:
        raise DatasetError(f"{where}: universe {shown(m.universe)} is not a count of instruments; {fix}")
    inst = [e for e in m.partitions if e["table"] == "instruments"]
    if len(inst) != 1 or inst[0]["path"] != INSTRUMENTS_PATH:
        raise DatasetError(f"{where}: not one instruments entry at {INSTRUMENTS_PATH}; {fix}")
    if inst[0]["rows"] != m.universe:
        raise DatasetError(f"{where}: universe {m.universe}, and its instruments entry has {inst[0]['rows']} rows; "
                           f"{fix}")
    days = set(calendar.days)
    for i, e in enumerate(m.partitions):
        if e["table"] == "instruments":
            continue
        if e["table"] not in MARKET_TABLES or not isinstance(e.get("block"), int) or e.get("day") not in days:
            raise DatasetError(f"{where}: partition entry {i} ({shown(e['path'])}): table, block or day "
                               f"{shown(e.get('day'))} not one of its calendar's; {fix}")
        if e["path"] != f"{e['table']}/{e['day']}/block-{e['block']}.parquet":
            raise DatasetError(f"{where}: partition entry {i}'s day {shown(e['day'])} or block {shown(e['block'])} "
                               f"is not that of its path {shown(e['path'])}; {fix}")
    if generated:
        n = m.universe
        want = {(t, b.day.isoformat(), b.index): [[b.first_rank, b.last_rank],
                                                  [mc.sym_of(b.first_rank, n), mc.sym_of(b.last_rank, n)]]
                for b in mc.blocks(n) for t in MARKET_TABLES}
        have = {(e["table"], e["day"], e["block"]): [e.get("ranks"), e.get("syms")]
                for e in m.partitions if e["table"] != "instruments"}
        if set(have) != set(want) or len(have) != len(m.partitions) - 1:
            raise DatasetError(f"{where}: partitions not the part files of universe {m.universe} (a day or block "
                               f"added, removed or repeated); {fix}")
        for key, (ranks, syms) in have.items():
            if [ranks, syms] != want[key]:
                raise DatasetError(f"{where}: the ranks or syms of {key[0]}/{key[1]}/block-{key[2]} are not those "
                                   f"of its block; {fix}")
    for table, e in m.csv.items():
        day_rows = sum(p["rows"] for p in m.partitions if p["table"] == table and p.get("day") == m.params.get("D"))
        if e["rows"] != day_rows:
            raise DatasetError(f"{where}: the {table} CSV's rows {e['rows']}, and its day D partitions hold "
                               f"{day_rows}; {fix}")


def check_market_data(directory: Path, m: Manifest, venues_seen: set[str]) -> None:
    """The market manifest's fields only the data can check: its venues (those of the quotes,
    ``venues_seen``), and for a generated dataset its seed and universe (the instruments table
    is regenerated from them) and its scale (day 1's first part file is regenerated at it);
    DatasetError naming the field."""
    where = directory / MANIFEST
    fix = MANIFEST_FIX
    venues = set(m.calendar["venues"]) if isinstance(m.calendar, dict) else set()
    # Generated: exactly the generator's (the calendar check); imported: every venue quoted is one
    # of the calendar's (an import may keep a venue whose instruments it dropped).
    if not venues_seen <= venues:
        raise DatasetError(f"{where}: calendar.venues {shown(sorted(venues))} are not the venues of its quotes "
                           f"{shown(sorted(venues_seen))}; {fix}")
    if m.source != "generated":
        return
    assert m.universe is not None
    entries = {e["path"]: e for e in m.partitions}
    inst = mc.instruments_table(mc.universe_instruments(m.seed, m.universe))
    if hash_table(inst) != entries[INSTRUMENTS_PATH]["hash"]:
        raise DatasetError(f"{where}: seed {m.seed} (universe {m.universe}) does not give its instruments table; {fix}")
    first = next(b for b in mc.blocks(m.universe) if b.index == 0 and b.day == mc.DAYS[0])
    data = generate_block(m.seed, first, m.universe, m.scale)
    for table in MARKET_TABLES:
        if hash_table(getattr(data, table)) != entries[first.path(table)]["hash"]:
            raise DatasetError(f"{where}: scale {m.scale:g} does not give its data ({first.path(table)} regenerated "
                               f"at scale {m.scale:g} differs); {fix}")
