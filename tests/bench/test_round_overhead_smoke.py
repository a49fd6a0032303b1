"""Smoke test of ``bench/round_overhead.py``: one crawl of one short round through the CLI,
its steps timed in the crawl's process, and the table printed. About 15 seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_one_round_is_crawled_and_its_steps_are_timed():
    proc = subprocess.run(
        [sys.executable, str(BENCH / "round_overhead.py"), "--rounds", "1", "--window", "1", "--repeat", "1"],
        capture_output=True, text=True, timeout=300, cwd=BENCH.parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    run = next(line for line in lines if " run 1: " in line)
    assert int(run.split("(")[1].split()[0]) > 0, run  # responses were fetched
    rows = {line.split("|")[1].strip(): line for line in lines if line.startswith("| ")}
    for step in ("wall beyond the window", "run_round", "CrawlRound.expand", "RoundCharts.round_done"):
        assert step in rows, proc.stdout
    # the round was timed: its run_round lasted at least its window
    assert float(rows["run_round"].split("|")[2]) >= 1.0, rows["run_round"]
