"""Smoke test of ``bench/state_rows.py`` on the embedded store: every figure prints, the new
URLs' rows both ways (as candidates and from a bucket's columns) among them. A few seconds."""

from __future__ import annotations

import re
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import state_rows  # noqa: E402


def test_every_figure_prints(capsys):
    assert state_rows.main(["--pages", "40", "--hosts", "4", "--stores", "embedded", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for label in (
        "queue_new_urls,",
        "as candidates, an empty store",
        "the same from its columns (queue_new_block)",
        "of which the columns' cells, keys and priorities",
        "settle + content and simhash rows",
        "simhash rows written: write_cells",
    ):
        line = next((line for line in out.splitlines() if label in line), None)
        assert line is not None, label
        assert re.search(r"\d+\.\d+ µs/", line), line
