"""Who waits for the embedded store's one writer during a round, and for how long.

SQLite lets one connection write at a time (``BEGIN IMMEDIATE``); a round's workers, and each
worker's fetch fence, take turns. This runs ``stage_timeline.py``'s steady-state round (simweb
on loopback, a cold and a warm-up round, then the measured one) with every process of it,
the SDK workers of ``--mp`` included, reporting each write transaction of the embedded store
(``embedded.COMMIT_HOOK``, set by a ``sitecustomize`` this script puts first on the workers'
``PYTHONPATH``): its table, when it began, the seconds it waited for the write lock and the
seconds it held it, and its cells. The measured round's transactions are summed by the stage
that was running when each began, and by table.

    python bench/store_locks.py [--hosts 3000] [--window 60] [--mp] [--top 6]

What a table's line says: ``held`` is SQLite's own time for the rows (B-tree pages, the WAL
and its checkpoints, and any wait for the GIL between rows, which Python's sqlite3 releases
while a statement runs), ``waited`` the time the other writers kept it from starting. A
stage whose held seconds, summed over its processes, near its wall seconds is bound by the
one writer, however many workers it has.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from apache_beam.runners.portability.fn_api_runner import fn_runner

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from stage_timeline import _short, add_round_arguments, warmed_up  # noqa: E402

from beamcrawl.stores import embedded  # noqa: E402

__all__ = ["LOG_ENV", "SITECUSTOMIZE", "main", "read_commits", "summarise"]

LOG_ENV = "BEAMCRAWL_BENCH_COMMIT_LOG"

# Loaded first by every Python process that gets the folder on its PYTHONPATH: each one
# appends its store's transactions to its own file beside the others.
SITECUSTOMIZE = f'''
import os
if os.environ.get("{LOG_ENV}"):
    from beamcrawl.stores import embedded

    def _log(table, began, waited, held, cells):
        path = os.path.join(os.environ["{LOG_ENV}"], "commits.%d.jsonl" % os.getpid())
        with open(path, "a") as fh:
            fh.write('["%s", %.6f, %.6f, %.6f, %d]\\n' % (table, began, waited, held, cells))

    embedded.COMMIT_HOOK = _log
'''


def read_commits(folder: str) -> list[tuple[int, str, float, float, float, int]]:
    """(pid, table, began, waited, held, cells) of every transaction logged in ``folder``."""
    out = []
    for path in Path(folder).glob("commits.*.jsonl"):
        pid = int(path.name.split(".")[1])
        for line in path.read_text().splitlines():
            table, began, waited, held, cells = json.loads(line)
            out.append((pid, table, began, waited, held, cells))
    return out


def summarise(
    commits: list[tuple[int, str, float, float, float, int]], stages: list[tuple[str, float, float]], top: int
) -> str:
    """The transactions that began during the ``(stage, start, end)`` spans, as Markdown: per
    stage (the ``top`` longest), per table, summed over processes."""
    rows: dict[tuple[str, str], list[Any]] = defaultdict(lambda: [0, 0.0, 0.0, 0, set()])
    wall: dict[str, float] = defaultdict(float)
    for stage, start, end in stages:
        wall[stage] += end - start
    for pid, table, began, waited, held, cells in commits:
        stage = next((s for s, start, end in stages if start <= began < end), None)
        if stage is None:
            continue
        entry = rows[(stage, table)]
        entry[0] += 1
        entry[1] += waited
        entry[2] += held
        entry[3] += cells
        entry[4].add(pid)
    longest = sorted(wall, key=lambda s: -wall[s])[:top]
    lines = [
        "| stage | wall s | table | processes | transactions | cells | waited s | held s | held µs a cell |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for stage in longest:
        tables = sorted((t for s, t in rows if s == stage), key=lambda t: -rows[(stage, t)][2])
        for table in tables or ["-"]:
            n, waited, held, cells, pids = rows.get((stage, table), [0, 0.0, 0.0, 0, set()])
            lines.append(
                f"| {_short(stage, 60)} | {wall[stage]:.2f} | {table} | {len(pids)} | {n:,} | {cells:,} | "
                f"{waited:.2f} | {held:.2f} | {1e6 * held / cells if cells else 0:.1f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_round_arguments(p)
    p.add_argument("--top", type=int, default=6, help="stages shown")
    args = p.parse_args(argv)

    folder = tempfile.mkdtemp(prefix="beamcrawl-locks-")
    Path(folder, "sitecustomize.py").write_text(SITECUSTOMIZE)
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", LOG_ENV)}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [folder, str(BENCH.parent), saved["PYTHONPATH"]]))
    os.environ[LOG_ENV] = folder
    stages: list[tuple[str, float, float]] = []
    original = fn_runner.FnApiRunner._execute_bundle

    def _execute_bundle(runner: Any, *a: Any, **kw: Any) -> Any:
        start = time.time()
        try:
            return original(runner, *a, **kw)
        finally:
            stages.append((a[1].stage.name, start, time.time()))

    def log_here(table: str, began: float, waited: float, held: float, cells: int) -> None:
        with open(os.path.join(folder, f"commits.{os.getpid()}.jsonl"), "a") as fh:
            fh.write(json.dumps([table, began, waited, held, cells]) + "\n")

    embedded.COMMIT_HOOK = log_here  # this process's own transactions (the in-process runner's)
    try:
        with warmed_up(args, "beamcrawl-locks-round-") as (_web, measured_round):
            fn_runner.FnApiRunner._execute_bundle = _execute_bundle  # type: ignore[method-assign]
            try:
                t0 = time.time()
                reports = measured_round()
                wall = time.time() - t0
            finally:
                fn_runner.FnApiRunner._execute_bundle = original  # type: ignore[method-assign]
    finally:
        embedded.COMMIT_HOOK = None
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    commits = [c for c in read_commits(folder) if c[2] >= t0]
    print(f"{int(reports[-1]['responses']):,} pages in {wall:.1f} s; {len(commits):,} write transactions\n")
    print(summarise(commits, stages, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
