"""Smoke test of ``bench/grown_store.py --commit-log``: two small rounds on a store filled
with known URLs, each round's write transactions logged by every process of it and summed
by table; and the sums' arithmetic on given transactions. About 30 seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import grown_store  # noqa: E402


def test_the_rounds_writes_are_summed_by_table(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "grown_store.py"), "--sizes", "2000", "--hosts", "20", "--window", "3",
         "--commit-log", "--dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=BENCH.parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rounds = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("  {")]
    assert [r["round"] for r in rounds] == [1, 2], proc.stdout
    first, second = (r["writes"] for r in rounds)
    # round 1 fetched the roots: the fence's host clocks, the new URLs' seen-set and frontier rows
    assert {"hosts", "urls", "frontier"} <= set(first), first
    assert all(first[t]["cells"] > 0 and first[t]["transactions"] > 0 for t in ("hosts", "urls", "frontier")), first
    # round 2 fetched pages: their content rows too
    assert "content" in second and second["content"]["cells"] > 0, second
    table = [line for line in proc.stdout.splitlines() if line.startswith("| 2,000 | ")]
    assert any(" | urls | " in line for line in table), proc.stdout


def test_writes_by_table_sums_each_tables_transactions() -> None:
    commits = [
        (1, "urls", 1.0, 0.5, 2.0, 1000),
        (2, "urls", 2.0, 0.25, 1.0, 500),
        (1, "hosts", 3.0, 0.0, 0.5, 10),
    ]
    assert grown_store.writes_by_table(commits) == {
        "urls": {"transactions": 2, "cells": 1500, "held_s": 3.0, "waited_s": 0.75},
        "hosts": {"transactions": 1, "cells": 10, "held_s": 0.5, "waited_s": 0.0},
    }
