"""The round's start alone: select, domain budgets, host state, slot assignment and the
plans grouped by fetch shard, over a stored frontier.

    PYTHONPATH=. .venv/bin/python bench/round_start.py STORE.sqlite [--now EPOCH_S]
        [--window 60] [--min-delay 0.5] [--no-budgets] [--timeline] [--repeat 1]

A deep frontier makes the round's start its memory peak (bench/README.md, "Flat"): half a
million due rows wait in the runner between the select, the domain budgets and slot
assignment's join by host, and the plans between slot assignment and the fetch. Whole rounds
vary too much from run to run to compare two trees on it (the warm-up rounds' pace decides
how many rows are due), so this bench runs only the start, on a crawl already stored (a
``memory_timeline.py`` folder's ``out/store.sqlite``, say): the same due rows every run, each
run on its own copy of the store (the budgets write deferred rows), in the in-process
FnApiRunner, with the crawl's default settings. Host names are not resolved (the plans do
not need an address unless ``--ip-delay`` is set); each plan's URLs are read where the fetch
would read them.

It prints the due rows, the hosts planned and the URLs assigned (which must not change
between two trees), the CPU seconds of the pipeline, and this process's RSS before the
pipeline and at its highest (sampled every 20 ms), and per due row. Compare two trees with
``PYTHONPATH`` pointing at each (``git worktree add``), one after the other on a quiet machine.

Not collected by pytest.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import threading
import time

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.schemas.records import HostPlan
from beamcrawl.transforms.assign_slots import AssignSlots
from beamcrawl.transforms.budgets import ApplyBudgets
from beamcrawl.transforms.dead_letter import collected
from beamcrawl.transforms.select import ReadDueFrontier, ReadHostState


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


class _Peak:
    """The highest RSS seen by a thread sampling every ``every`` seconds."""

    def __init__(self, every: float = 0.02) -> None:
        self.every = every
        self.high = _rss_mb()
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        t0 = time.perf_counter()
        while not self._stop.wait(self.every):
            rss = _rss_mb()
            self.high = max(self.high, rss)
            self.samples.append((time.perf_counter() - t0, rss))

    def __enter__(self) -> "_Peak":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_once(
    store_file: str, now: float, window: float, min_delay: float, budgets: bool = True, timeline: bool = False
) -> dict[str, float]:
    work = tempfile.mkdtemp(prefix="round-start-")
    for suffix in ("", "-wal", "-shm"):  # the budgets write deferred rows: each run has its own copy
        if os.path.exists(store_file + suffix):
            shutil.copy(store_file + suffix, os.path.join(work, "store.sqlite" + suffix))
    store = f"sqlite:///{work}/store.sqlite"
    cfg = CrawlConfig(out=os.path.join(work, "out"), store=store, min_delay=min_delay, round_window=window)
    outputs = RoundOutputs(cfg.out, 1)
    options = PipelineOptions(["--direct_running_mode=in_memory"])
    p = beam.Pipeline(runner="FnApiRunner", options=options)
    due = (
        p
        | "Read due frontier" >> ReadDueFrontier(store, int(now * 1000))
        | "Apply domain budgets" >> ApplyBudgets(store, cfg.budget_rules(), now, outputs, enabled=budgets)
    )
    state = due | "Read host state" >> ReadHostState(store)
    plans = {"due": due, "hosts": state.records, "policies": state.policies} | "Assign slots" >> AssignSlots(cfg, now)
    # As the fetch stage gets them: grouped by fetch shard, each plan's URLs read.
    _ = (
        plans
        | "Key by fetch shard" >> beam.Map(lambda plan: (plan.shard, plan)).with_output_types(tuple[int, HostPlan])
        | "Group by fetch shard" >> beam.GroupByKey()
        | "Read each plan" >> beam.Map(lambda sp: sum(len(list(plan.entries)) for plan in sp[1]))
    )
    _ = collected(p) | "Count dead letters" >> beam.Map(lambda letter: None)
    start_rss = _rss_mb()
    cpu = time.process_time()
    wall = time.perf_counter()
    with _Peak() as peak:
        result = p.run()
        result.wait_until_finish()
    cpu = time.process_time() - cpu
    wall = time.perf_counter() - wall
    if timeline:  # RSS each second of the run: where in the pipeline the peak is
        marks: dict[int, float] = {}
        for at, rss in peak.samples:
            marks[int(at)] = max(marks.get(int(at), 0.0), rss)
        print("  RSS MB by second: " + " ".join(f"{s}:{rss:.0f}" for s, rss in sorted(marks.items())))
    counters = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]}
    due_rows = counters.get("due_rows", 0)
    return {
        "due_rows": due_rows,
        "hosts_planned": counters.get("hosts_planned", 0),
        "urls_assigned": counters.get("urls_assigned", 0),
        "cpu_s": cpu,
        "wall_s": wall,
        "rss_start_mb": start_rss,
        "rss_peak_mb": peak.high,
        "bytes_per_due_row": (peak.high - start_rss) * 2**20 / due_rows if due_rows else 0.0,
    }
    shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", help="an embedded store's file (sqlite); each run works on a copy")
    parser.add_argument("--now", type=float, default=None, help="the round's start, epoch s (default: now)")
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--min-delay", type=float, default=0.5)
    parser.add_argument("--no-budgets", action="store_true", help="domain budgets off (they are on by default)")
    parser.add_argument("--timeline", action="store_true", help="print the highest RSS of each second")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs in this process (the first pays the imports' warm-up)"
    )
    args = parser.parse_args(argv)
    now = time.time() if args.now is None else args.now
    print("run  due_rows  hosts_planned  urls_assigned  cpu_s  wall_s  rss_start_mb  rss_peak_mb  B/due_row")
    for i in range(args.repeat):
        r = run_once(args.store, now, args.window, args.min_delay, not args.no_budgets, args.timeline)
        print(
            f"{i:>3}  {r['due_rows']:>8}  {r['hosts_planned']:>13}  {r['urls_assigned']:>13}  {r['cpu_s']:>5.1f}"
            f"  {r['wall_s']:>6.1f}  {r['rss_start_mb']:>12.0f}  {r['rss_peak_mb']:>11.0f}  {r['bytes_per_due_row']:>9.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
