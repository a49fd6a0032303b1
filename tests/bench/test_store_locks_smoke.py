"""Smoke test of ``bench/store_locks.py``: a small round on two SDK workers, whose write
transactions reach the summary from both worker processes (the ``sitecustomize`` the script
puts on their path), and the summary's arithmetic on given transactions. About 25 seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import store_locks  # noqa: E402


def test_the_workers_transactions_are_summed_by_stage_and_table():
    proc = subprocess.run(
        # every stage shown: in a round this small URL seen's may not be among the six longest
        [sys.executable, str(BENCH / "store_locks.py"), "--hosts", "30", "--window", "3", "--warmup-window", "2", "--mp",
         "--top", "100"],
        capture_output=True, text=True, timeout=300, cwd=BENCH.parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split(" | ") for line in proc.stdout.splitlines() if line.startswith("| Crawl")]
    by_table = {(row[0], row[2]): row for row in rows}
    fetch = [row for (stage, table), row in by_table.items() if "Fetch" in stage and table == "hosts"]
    # the fence records each host's clock before its requests, from both workers
    assert fetch and int(fetch[0][3]) == 2 and int(fetch[0][5].replace(",", "")) > 0, proc.stdout
    # URL seen writes the new URLs' seen-set and frontier rows
    seen = {table for (stage, table) in by_table if "URL seen" in stage}
    assert {"urls", "frontier"} <= seen, proc.stdout


def test_summarise_attributes_each_transaction_to_the_stage_it_began_in():
    stages = [("A", 0.0, 10.0), ("B", 10.0, 12.0)]
    commits = [
        (1, "urls", 1.0, 0.5, 2.0, 1000),
        (2, "urls", 2.0, 0.0, 1.0, 1000),
        (1, "hosts", 10.5, 0.1, 0.2, 10),
        (1, "urls", 13.0, 0.0, 9.0, 5),  # after the round's stages: not counted
    ]
    table = store_locks.summarise(commits, stages, top=2)
    lines = table.splitlines()
    assert lines[2].split(" | ")[1:] == ["10.00", "urls", "2", "2", "2,000", "0.50", "3.00", "1500.0 |"]
    assert lines[3].split(" | ")[1:] == ["2.00", "hosts", "1", "1", "10", "0.10", "0.20", "20000.0 |"]
    assert len(lines) == 4
