"""What the page shells need of a suite (:class:`ReportSuite`), and how they lay the suites out.

The shells are given the suites (``tickbench.suites.registry`` picks them; this package imports
no suite). A suite with ``own_sections`` (the published suite) places its sections in the page's
three places (what was measured, the comparison with the reference paper, the appendix); every
other suite's section goes in one group, "Suites beyond the paper", under the suite's title.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from html import escape

from tickbench.report.cells import Measure
from tickbench.report.summary import Merged
from tickbench.report.widgets import AddChart, PageParts, Section, SuiteView
from tickbench.results import Record


class ReportSuite(typing.Protocol):
    """What the reports read of a suite (``tickbench.suites.base.Suite`` implements it)."""

    @property
    def name(self) -> str:
        """The name its records carry in ``suite``."""

    @property
    def title(self) -> str:
        """Its title in the reports."""

    @property
    def own_sections(self) -> bool:
        """Whether its sections stand at the top of the page (else in the group of further suites)."""

    def report_html(self, view: SuiteView) -> PageParts[list[Section]]:
        """Its HTML sections (for a grouped suite: one section, the body under its title)."""

    def report_markdown(self, view: SuiteView) -> PageParts[list[str]]:
        """Its Markdown (for a grouped suite: the body under its title)."""

    def headline(self, record: Record) -> str:
        """The one figure that sums up an ok cell in the terminal."""

    def cell_text(self, record: Record) -> str:
        """A cell's text in a matrix of benchmarks × engines."""

    def measures(self, record: Record) -> list[Measure]:
        """The figures ``tickbench compare`` compares of a cell."""


def views(merged: Merged, suites: Iterable[ReportSuite], engines: list[str], colors: dict[str, str],
          add: AddChart | None = None) -> list[tuple[ReportSuite, SuiteView]]:
    """(suite, its view) for every suite with records in the run, in the suites' order."""
    out = []
    for suite in suites:
        records = [r for r in merged.results.records if r.suite == suite.name]
        if records:
            out.append((suite, SuiteView(records, merged, engines, colors, add)))
    return out


BEYOND_INTRO = ("Suites that measure what the paper does not (SPEC §2.2; protocols in METHODOLOGY.md). Latency "
                "distributions are the HDR histograms saved in results.json; a cell that is not ok is in its table "
                "with its status and reason, and not in the charts.")


def group_html(grouped: list[tuple[ReportSuite, PageParts[list[Section]]]]) -> list[Section]:
    """The section of the further suites (none when the run has none of their records)."""
    parts = [f'<h3 id="beyond-{escape(s.name)}">{escape(s.title)}</h3>' + "".join(x.html for x in p.results)
             for s, p in grouped]
    if not parts:
        return []
    body = f'<h2 id="beyond">Suites beyond the paper</h2><p class="muted">{escape(BEYOND_INTRO)}</p>{"".join(parts)}'
    return [Section("beyond", "Beyond the paper", body)]


def group_markdown(grouped: list[tuple[ReportSuite, PageParts[list[str]]]]) -> list[str]:
    """The further suites' Markdown sections (``##`` each)."""
    out: list[str] = []
    for suite, parts in grouped:
        out += [f"## {suite.title}", "", *parts.results, ""]
    return out


def find(suites: Iterable[ReportSuite], name: str) -> ReportSuite | None:
    return next((s for s in suites if s.name == name), None)
