"""The results file: versioned, self-describing, refused when of another version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tickbench.results import SCHEMA_VERSION, Results, ResultsError, Stats, read_results


def test_stats_summarise_samples() -> None:
    s = Stats.of([1_000_000, 3_000_000, 2_000_000])
    assert (s.n, s.median_ms, s.mean_ms, s.min_ms, s.max_ms) == (3, 2.0, 2.0, 1.0, 3.0)
    assert s.std_ms == pytest.approx(1.0)


def test_other_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(ResultsError, match="schema version"):
        read_results(path)
    path.write_text("{not json")
    with pytest.raises(ResultsError, match="not a readable"):
        read_results(path)


def test_json_schema_names_the_required_fields() -> None:
    schema = Results.model_json_schema()
    for key in ("schema_version", "environment", "dataset", "records", "params"):
        assert key in schema["properties"]
