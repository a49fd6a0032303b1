"""The parse's CPU a page inside a round against the same code alone, and what the gap is made of.

The per-page benches (``stage_costs.py``, ``per_page_costs.py``) time the parse in a thread of
its own; in a round it shares its process with the fetch loop's thread. Two measurements:

- **in a round** (left out with ``--no-round``): simweb on loopback, a cold and a warm-up
  round, then a measured round, all in this process on the FnApiRunner (``stage_timeline.py``'s
  set-up, in process: the fetch loop's thread and the parse share the process, as they do in
  each SDK worker with ``multi_processing``). ``parse_fetch`` is wrapped: the CPU time of the
  calling thread a call (``time.thread_time``, so the time it waits for the GIL is not
  counted), and, from ``gc.callbacks`` by the same clock, the garbage collector's CPU inside the
  parse and outside it, by generation;
- **alone and beside a thread** (``--pairs`` times, in turn): simweb's pages
  (``stage_costs.sample_results``) parsed in this thread alone, then while another thread of
  this process does Python work in slices (``--slice-us``) between sleeps (``--sleep-us``), as
  the fetch loop wakes for its sockets' events between waits, and again with a longer GIL
  switch interval (``--switch-ms``). Each figure is the parsing thread's CPU a page.

    python bench/parse_in_round.py [--hosts 1000] [--window 20] [--pages 2000] [--pairs 4] [--no-round]

Wraps a module attribute of beamcrawl (``transforms.parse.parse_fetch``) for the measured round
only: a measuring tool, not part of beamcrawl. In process only (with ``--mp`` the parse runs in
the SDK workers, where this wrapper is not).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from stage_costs import sample_results  # noqa: E402
from stage_timeline import add_round_arguments, warmed_up  # noqa: E402

from beamcrawl.core.runtime import gctune  # noqa: E402
from beamcrawl.transforms import parse as parse_module  # noqa: E402

__all__ = ["ParseClock", "beside_a_thread", "main"]


class ParseClock:
    """Wraps ``parse_fetch`` and the garbage collector: CPU of the calling thread a parse, and
    collections (count, CPU) by generation, inside a parse and outside it."""

    def __init__(self) -> None:
        self.calls = 0
        self.cpu = 0.0
        self.wall = 0.0
        self.gc: dict[tuple[bool, int], list[float]] = {}  # (inside a parse, generation) -> [count, CPU s]
        self._local = threading.local()
        self._started: dict[int, float] = {}
        self._original: Callable[..., Any] | None = None

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        me = threading.get_ident()
        if phase == "start":
            self._started[me] = time.thread_time()
            return
        began = self._started.pop(me, None)
        if began is None:
            return
        entry = self.gc.setdefault((getattr(self._local, "parsing", False), info["generation"]), [0, 0.0])
        entry[0] += 1
        entry[1] += time.thread_time() - began

    def __enter__(self) -> "ParseClock":
        original = self._original = parse_module.parse_fetch

        def timed(*args: Any, **kwargs: Any) -> Any:
            self._local.parsing = True
            c0, w0 = time.thread_time(), time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self._local.parsing = False
                self.calls += 1
                self.cpu += time.thread_time() - c0
                self.wall += time.perf_counter() - w0

        parse_module.parse_fetch = timed
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._on_gc)
        assert self._original is not None
        parse_module.parse_fetch = self._original

    def report(self, process_cpu: float) -> str:
        n = max(1, self.calls)
        lines = [
            f"in the round: {self.calls:,} parses, {self.cpu / n * 1e6:.1f} µs of the parsing thread's CPU a parse "
            f"({self.wall / n * 1e6:.1f} µs of wall, the GIL's waits included); the process {process_cpu:.1f} CPU s",
            "",
            "| garbage collection | collections | CPU s | µs a parse |",
            "|---|---:|---:|---:|",
        ]
        for inside in (True, False):
            for generation in (0, 1, 2):
                count, cpu = self.gc.get((inside, generation), [0, 0.0])
                where = "inside a parse" if inside else "outside the parse"
                lines.append(f"| generation {generation}, {where} | {int(count):,} | {cpu:.2f} | {cpu / n * 1e6:.1f} |")
        return "\n".join(lines)


def _parse_all(results: list[Any]) -> float:
    """The calling thread's CPU µs a page to parse every result once."""
    c0 = time.thread_time()
    for result in results:
        parse_module.parse_fetch(result, "beamcrawl")
    return (time.thread_time() - c0) / len(results) * 1e6


def beside_a_thread(results: list[Any], slice_us: float, sleep_us: float, switch_ms: float | None) -> float:
    """CPU µs a page of parsing ``results`` while another thread works ``slice_us`` of Python
    between sleeps of ``sleep_us``; with ``switch_ms``, the GIL's switch interval for it."""
    stop = threading.Event()
    wakes = [0]

    def work() -> None:
        held: dict[int, Any] = {}
        while not stop.is_set():
            t0, i = time.perf_counter(), 0
            while (time.perf_counter() - t0) * 1e6 < slice_us:
                held[i % 5000] = (str(i), [i, i + 1])  # small objects made and dropped, as an event loop does
                i += 1
            wakes[0] += 1
            time.sleep(sleep_us / 1e6)

    before = sys.getswitchinterval()
    if switch_ms is not None:
        sys.setswitchinterval(switch_ms / 1000)
    other = threading.Thread(target=work, name="parse-in-round-other")
    other.start()
    try:
        return _parse_all(results)
    finally:
        stop.set()
        other.join()
        sys.setswitchinterval(before)
        if not wakes[0]:
            raise RuntimeError("the other thread never ran")


def pairs_table(results: list[Any], pairs: int, slice_us: float, sleep_us: float, switch_ms: float) -> str:
    rows: dict[str, list[float]] = {}
    names = (
        "alone",
        f"beside a thread: {slice_us:g} µs of work, {sleep_us:g} µs asleep",
        f"the same, GIL switch interval {switch_ms:g} ms",
    )
    for _ in range(pairs):
        rows.setdefault(names[0], []).append(_parse_all(results))
        rows.setdefault(names[1], []).append(beside_a_thread(results, slice_us, sleep_us, None))
        rows.setdefault(names[2], []).append(beside_a_thread(results, slice_us, sleep_us, switch_ms))
    alone = rows[names[0]]
    lines = [
        f"{len(results):,} simweb pages parsed in this thread, {pairs} times each way in turn "
        f"(the GIL's switch interval {sys.getswitchinterval() * 1000:g} ms unless said)",
        "",
        "| parse | CPU µs a page, each turn | median | against alone, by turn |",
        "|---|---|---:|---|",
    ]
    for name, values in rows.items():
        ratios = " ".join(f"{v / a:.2f}x" for v, a in zip(values, alone))
        lines.append(
            f"| {name} | {' '.join(f'{v:.0f}' for v in values)} | {statistics.median(values):.0f} | {ratios} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_round_arguments(p, mp_help="not measured here: the wrapped parse must run in this process")
    p.add_argument("--no-round", action="store_true", help="only the pages alone and beside a thread")
    p.add_argument("--pages", type=int, default=2000, help="simweb pages parsed alone and beside a thread")
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--slice-us", type=float, default=200.0)
    p.add_argument("--sleep-us", type=float, default=500.0)
    p.add_argument("--switch-ms", type=float, default=50.0)
    args = p.parse_args(argv)
    if args.mp:
        p.error("--mp: the parse runs in the SDK workers there, where this wrapper is not; run it in process")
    if args.pages < 1 or args.pairs < 1 or args.slice_us <= 0 or args.sleep_us <= 0 or args.switch_ms <= 0:
        p.error("--pages and --pairs must be at least 1, --slice-us, --sleep-us and --switch-ms above 0")
    gctune.tune()  # as the round's workers do
    if not args.no_round:
        with warmed_up(args, "beamcrawl-parse-in-round-") as (_web, measured_round):
            c0 = time.process_time()
            with ParseClock() as clock:
                measured_round()
            print(clock.report(time.process_time() - c0))
            print()
    results = sample_results(args.hosts, args.pages)
    print(pairs_table(results, args.pairs, args.slice_us, args.sleep_us, args.switch_ms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
