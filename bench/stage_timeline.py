"""Where a round's wall time goes, stage by stage, and which processes were busy meanwhile.

Starts simweb on loopback, runs a cold round (robots.txt and roots) and a warm-up round so the
frontier is deep, then a measured round, all in this process on the FnApiRunner. For every
bundle the runner executes it records the stage, the wall seconds and the CPU seconds each
process used meanwhile: the runner (this process), with ``--mp`` the two SDK worker
processes, and the simweb server apart; the crawler's (runner and workers) CPU a page, by
stage and for the whole round. A stage's *use* is all of that CPU over its wall time: near 2
on these 2 cores means the stage kept the machine busy; near 1 means one process did the work
while the others waited.

    python bench/stage_timeline.py [--hosts 1000] [--window 20] [--mp] [--top 15]

Wraps ``FnApiRunner._execute_bundle``, a private method of Beam's runner: a measuring tool,
not part of beamcrawl. Linux only (CPU from ``/proc``, as ``harness.py`` reads it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator

from apache_beam.runners.portability.fn_api_runner import fn_runner

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from beamcrawl_round import bench_config  # noqa: E402
from harness import free_port, process_tree, simweb_on_port, stat_cpu_seconds  # noqa: E402

from beamcrawl.pipelines.runners import with_local_runner  # noqa: E402
from beamcrawl.pipelines.crawl import crawl  # noqa: E402

__all__ = ["main"]

MP = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


SERVER = -1  # the key of the simweb server's CPU (its whole process tree)


def _cpu_by_process(server_pid: int | None = None) -> dict[int, float]:
    """User + system CPU seconds of this process (key 0), of the server's tree (key
    :data:`SERVER`) and of each other descendant (the SDK workers), by pid."""
    me = os.getpid()
    server = {pid for pid, _ in process_tree(server_pid)} if server_pid else set()
    used: dict[int, float] = {}
    for pid, fields in process_tree(me):
        key = 0 if pid == me else SERVER if pid in server else pid
        used[key] = used.get(key, 0.0) + stat_cpu_seconds(fields)
    return used


class _Recorder:
    """Wraps the runner's bundle execution; keeps (stage, wall s, CPU s by process) per bundle."""

    def __init__(self, server_pid: int | None = None) -> None:
        self.server_pid = server_pid
        self.bundles: list[tuple[str, float, dict[int, float]]] = []
        self._original = fn_runner.FnApiRunner._execute_bundle

    def __enter__(self) -> "_Recorder":
        original, recorder = self._original, self

        def _execute_bundle(runner: Any, *args: Any, **kwargs: Any) -> Any:
            t0, c0 = time.monotonic(), _cpu_by_process(recorder.server_pid)
            try:
                return original(runner, *args, **kwargs)
            finally:
                c1 = _cpu_by_process(recorder.server_pid)
                stage = args[1].stage.name  # (execution context, bundle context manager, input)
                used = {pid: c1[pid] - c0.get(pid, 0.0) for pid in c1}
                recorder.bundles.append((stage, time.monotonic() - t0, used))

        fn_runner.FnApiRunner._execute_bundle = _execute_bundle  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        fn_runner.FnApiRunner._execute_bundle = self._original  # type: ignore[method-assign]


def _short(stage: str, width: int = 90) -> str:
    """A fused stage's name without Beam's ref_AppliedPTransform_ noise, cut to ``width``."""
    name = stage.replace("ref_AppliedPTransform_", "").replace("ref_PCollection_", "").strip("()")
    return name if len(name) <= width else name[: width - 1] + "…"


def report(bundles: list[tuple[str, float, dict[int, float]]], pages: int, wall: float, top: int) -> str:
    """The measured round's stages by wall time, as Markdown, and the whole round's CPU: the
    crawler's (the runner and its workers) a page, and the server's apart."""
    by_stage: dict[str, list[Any]] = defaultdict(lambda: [0, 0.0, Counter()])
    for stage, seconds, used in bundles:
        entry = by_stage[stage]
        entry[0] += 1
        entry[1] += seconds
        entry[2].update(used)
    lines = [
        f"{pages:,} pages in {wall:.1f} s ({pages / wall:,.0f} pages/s); "
        f"{sum(s for _, s, _ in bundles):.1f} s in {len(bundles)} bundles of {len(by_stage)} stages",
        "",
        "| stage | bundles | wall s | CPU s: runner | CPU s: workers, busiest first | CPU s: server "
        "| crawler's CPU ms a page | use |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    crawler_total = server_total = 0.0
    rows = sorted(by_stage.items(), key=lambda kv: -kv[1][1])
    for i, (stage, (n, seconds, used)) in enumerate(rows):
        workers = sorted((v for pid, v in used.items() if pid not in (0, SERVER)), reverse=True)
        crawler = used.get(0, 0.0) + sum(workers)
        server = used.get(SERVER, 0.0)
        crawler_total += crawler
        server_total += server
        if i >= top:
            continue
        lines.append(
            f"| {_short(stage)} | {n} | {seconds:.2f} | {used.get(0, 0.0):.2f} | "
            f"{' / '.join(f'{v:.2f}' for v in workers if v >= 0.005) or '-'} | {server:.2f} | "
            f"{1000 * crawler / max(pages, 1):.3f} | {(crawler + server) / seconds if seconds else 0:.2f} |"
        )
    lines += [
        "",
        f"All {len(rows)} stages: the crawler's CPU {crawler_total:.1f} s ({1000 * crawler_total / max(pages, 1):.2f} ms "
        f"a page), the server's {server_total:.1f} s ({1000 * server_total / max(pages, 1):.2f} ms a page)",
    ]
    return "\n".join(lines)


def add_round_arguments(p: argparse.ArgumentParser, mp_help: str = "multi_processing with two workers") -> None:
    """The steady-state round's settings (shared with ``memory_timeline.py``)."""
    p.add_argument("--hosts", type=int, default=1000)
    p.add_argument("--window", type=float, default=20.0, help="the measured round's window, s")
    p.add_argument("--warmup-window", type=float, default=10.0)
    p.add_argument(
        "--warmup-rounds", type=int, default=1,
        help="warm-up rounds after the cold one (each queues about 6 new URLs a page: more for a long window)",
    )  # fmt: skip
    p.add_argument("--delay", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--mp", action="store_true", help=mp_help)


def round_config(out: str, args: argparse.Namespace, window: float) -> Any:
    """The settings of a round of these benches on the output folder ``out``."""
    return bench_config(out, delay=args.delay, window=window, crawl_delay_cap=2, hosts_in_flight=args.hosts)


def round_runner(args: argparse.Namespace) -> list[str]:
    """The pipeline arguments of a round of these benches (two workers with ``--mp``)."""
    return with_local_runner(list(MP) if args.mp else [])


def measure_round(out: str, args: argparse.Namespace) -> list[dict]:
    """Crawls one round of ``args.window`` seconds on the warmed output folder ``out``; its reports."""
    return crawl(round_config(out, args, args.window), 1, [], round_runner(args), out=sys.stderr)


@contextlib.contextmanager
def warmed_store(args: argparse.Namespace, prefix: str) -> Iterator[tuple[Any, str]]:
    """simweb, then a cold round and ``--warmup-rounds`` warm-up rounds in this process; yields the
    server and the warmed output folder (its store inside), while the server runs."""
    work = tempfile.mkdtemp(prefix=prefix)
    port = free_port()
    with simweb_on_port(
        work, port, hosts=args.hosts, seed=args.seed, pages_per_host=1_000_000, log_name="requests.jsonl"
    ) as web:
        seeds = [f"http://{name}:{port}/" for name in web.truth()]
        out = os.path.join(work, "out")
        rounds = 1 + getattr(args, "warmup_rounds", 1)
        crawl(round_config(out, args, args.warmup_window), rounds, seeds, round_runner(args), out=sys.stderr)
        yield web, out


@contextlib.contextmanager
def warmed_up(args: argparse.Namespace, prefix: str) -> Iterator[tuple[Any, Callable[[], list[dict]]]]:
    """:func:`warmed_store`; yields the server and a function that crawls the measured round in
    this process (its reports)."""
    with warmed_store(args, prefix) as (web, out):
        yield web, lambda: measure_round(out, args)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_round_arguments(p)
    p.add_argument("--top", type=int, default=15, help="stages shown")
    args = p.parse_args(argv)

    with warmed_up(args, "beamcrawl-timeline-") as (web, measured_round):
        with _Recorder(getattr(getattr(web, "process", None), "pid", None)) as recorder:
            t0 = time.monotonic()
            reports = measured_round()
            wall = time.monotonic() - t0
    print(report(recorder.bundles, int(reports[-1]["responses"]), wall, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
