"""bench/stage_timeline.py's CPU by process: the server's tree is kept apart from the crawler's
processes, and the report gives the crawler's CPU a page by stage and for the whole round."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import stage_timeline  # noqa: E402
from stage_timeline import SERVER, report  # noqa: E402

# A child that burns about 0.3 s of CPU, then waits for its stdin to close.
_BURNER = (
    "import sys, time\n"
    "end = time.process_time() + 0.3\n"
    "while time.process_time() < end: pass\n"
    "print('done', flush=True); sys.stdin.read()\n"
)


def test_the_servers_cpu_is_kept_apart_from_the_workers() -> None:
    child = subprocess.Popen([sys.executable, "-c", _BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "done"
        as_server = stage_timeline._cpu_by_process(child.pid)
        as_worker = stage_timeline._cpu_by_process()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    assert as_server[SERVER] >= 0.25 and child.pid not in as_server
    assert SERVER not in as_worker and as_worker[child.pid] >= 0.25
    assert as_server[0] > 0 and as_worker[0] > 0


def test_report_gives_the_crawlers_cpu_a_page_without_the_server() -> None:
    bundles = [
        ("fetch stage", 60.0, {0: 1.0, 101: 45.0, 102: 44.0, SERVER: 34.0}),
        ("after content seen", 12.0, {0: 0.5, 101: 12.0, 102: 11.5}),
        ("after content seen", 1.0, {0: 0.1, 101: 0.5, 102: 0.4}),
        ("a small stage", 0.5, {0: 0.2}),
    ]
    lines = report(bundles, pages=100_000, wall=80.0, top=2).splitlines()
    rows = [line.split("|")[1:-1] for line in lines if line.startswith("| ") and "---" not in line][1:]
    assert [r[0].strip() for r in rows] == ["fetch stage", "after content seen"]  # top 2 by wall time
    fetch, after = rows
    assert fetch[4].strip() == "45.00 / 44.00" and fetch[5].strip() == "34.00"
    assert fetch[6].strip() == "0.900"  # (1 + 45 + 44) s over 100,000 pages, the server's 34 s apart
    assert after[1].strip() == "2" and after[6].strip() == "0.250" and after[5].strip() == "0.00"
    # The whole round counts every stage, the one not shown too.
    assert lines[-1].startswith("All 3 stages: the crawler's CPU 115.2 s (1.15 ms a page), the server's 34.0 s (0.34")
