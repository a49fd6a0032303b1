"""Smoke test of ``bench/stage_costs.py``: every stage's row prints on a few simweb pages,
the pages' batch-file pickling among them. Some seconds."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import stage_costs  # noqa: E402


def test_every_stage_prints_a_figure(capsys):
    assert stage_costs.main(["--hosts", "3", "--pages", "30"]) == 0
    out = capsys.readouterr().out
    rows = {line.split(" | ")[0].lstrip("| ").strip(): line for line in out.splitlines() if line.startswith("| ")}
    for name in (
        "parse_fetch (selectolax, normalise + fingerprint every link)",
        "link_edge_parts (links/ rows: the page's values once, the links' columns)",
        "page_candidates",
        "pickle the pages into batch files (bodies set aside)",
        "pickle: the batch files' pages read back",
    ):
        assert name in rows, name
    assert "B/page" in rows["pickle the pages into batch files (bodies set aside)"]
