"""What a round costs besides its fetch window: a crawl of short rounds through the CLI.

    .venv/bin/python bench/round_overhead.py [--rounds 5] [--window 6] [--repeat 3]
        [--trees /tmp/before,.]

Each run crawls a small simweb (6 hosts, 100 pages each, as the freshness bench's web: a
host's pages outnumber its slots, so every round has a full window's work) for ``--rounds``
rounds of ``--window`` seconds through ``beamcrawl crawl``, and prints the crawl's wall per
round beyond the window (Python's and Beam's start, seeding and the final wait included,
spread over the rounds), and the seconds the crawl loop spent in each named step (timed in
the crawl's process by wrapping them; a step a tree does not have is left out).

With ``--trees A,B`` the runs of each tree alternate (A B A B ...), each tree's code taken
from its folder (``git worktree add /tmp/before REV``; its compiled extensions built with
``python setup.py build_ext --inplace`` there): this machine's speed moves by up to 2x
between runs a minute apart, so two trees are compared in turns, never one after the other.

Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Steps of the crawl loop timed in the child: (module, qualified name).
STEPS = (
    ("beamcrawl.pipelines.launch", "run_round"),
    ("apache_beam.runners.portability.fn_api_runner.fn_runner", "FnApiRunner.run_pipeline"),
    ("beamcrawl.pipelines.round", "CrawlRound.expand"),
    ("apache_beam.pipeline", "Pipeline.to_runner_api"),
    ("beamcrawl.pipelines.launch", "job_shuffle_figures"),
    ("beamcrawl.pipelines.launch", "commit_round"),
    ("beamcrawl.pipelines.crawl", "charts_after_round"),  # trees before round_charts.py
    ("beamcrawl.pipelines.round_charts", "RoundCharts.round_done"),
    ("beamcrawl.pipelines.round_charts", "RoundCharts.close"),
)
WEB = {
    "hosts": 6,
    "pages_per_host": 100,
    "seed": 11,
    "latency_scale": 0,
    "change_scale": 2.5,
    "change_mix": "static=0.5,slow=0.05,medium=0.2,fast=0.25",
}


def _child(timings_path: str, argv: list[str]) -> None:
    """Runs ``beamcrawl`` with ``argv`` in this process, the steps wrapped in timers; writes
    the seconds and calls of each to ``timings_path`` at exit."""
    import atexit
    import functools
    import importlib
    import runpy

    seconds: dict[str, float] = {}
    calls: dict[str, int] = {}

    def wrap(module: str, qualname: str) -> None:
        try:
            owner: object = importlib.import_module(module)
        except ImportError:
            return
        *path, name = qualname.split(".")
        for part in path:
            owner = getattr(owner, part, None)  # type: ignore[assignment]
        real = getattr(owner, name, None)
        if real is None:
            return

        @functools.wraps(real)
        def timed(*args: object, **kwargs: object) -> object:
            started = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                seconds[qualname] = seconds.get(qualname, 0.0) + time.perf_counter() - started
                calls[qualname] = calls.get(qualname, 0) + 1

        setattr(owner, name, timed)

    for module, qualname in STEPS:
        wrap(module, qualname)
    atexit.register(lambda: Path(timings_path).write_text(json.dumps({"seconds": seconds, "calls": calls})))
    sys.argv = ["beamcrawl", *argv]
    runpy.run_module("beamcrawl.cli.main", run_name="__main__")


def _run(tree: Path, work: Path, rounds: int, window: float) -> dict:
    from beamcrawl.simweb.freshness_audit import truth_pages
    from beamcrawl.simweb.testing import running_simweb

    with running_simweb(str(work / "web"), **WEB) as web:  # type: ignore[arg-type]
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(sorted(truth_pages(web.truth(), allowed_only=True, sitemap_only=False))) + "\n")
        timings = work / "timings.json"
        cmd = [
            sys.executable, str(Path(__file__).resolve()), "--child", str(timings), "--",
            "crawl", "--seeds", str(seeds), "--out", str(work / "out"), "--rounds", str(rounds),
            "--resolve", "*=127.0.0.1", "--allow-private-networks", "--min-delay", "0.5",
            "--round-window", str(window), "--runner", "FnApiRunner",
        ]  # fmt: skip
        env = dict(os.environ, PYTHONPATH=str(tree), BEAMCRAWL_PROGRESS="plain")
        started = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            sys.exit(f"the crawl in {tree} failed (rc {proc.returncode}): {proc.stderr[-2000:]}")
        responses = sum(
            int(line.split()[2])
            for line in proc.stdout.splitlines()
            if line.startswith("round ") and " responses in " in line
        )
        return {"wall": wall, "responses": responses, **json.loads(timings.read_text())}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[4:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--window", type=float, default=6.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trees", default=".", help="Comma-separated source folders, run in turns.")
    args = parser.parse_args()
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    runs: dict[Path, list[dict]] = {tree: [] for tree in trees}
    with tempfile.TemporaryDirectory(prefix="round-overhead-") as tmp:
        for i in range(args.repeat):
            for n, tree in enumerate(trees):
                run = _run(tree, Path(tmp) / f"{i}-{n}", args.rounds, args.window)
                runs[tree].append(run)
                beyond = run["wall"] / args.rounds - args.window
                print(
                    f"{tree} run {i + 1}: {run['wall']:.1f} s for {args.rounds} rounds of {args.window:g} s "
                    f"({run['responses']} responses): {beyond:.2f} s a round beyond the window",
                    flush=True,
                )
    print(f"\nseconds a round (median of {args.repeat} runs; wall beyond the window, then each step)")
    steps = sorted({s for tree_runs in runs.values() for r in tree_runs for s in r["seconds"]})
    print("| step | " + " | ".join(str(t) for t in trees) + " |")
    print("|---|" + "---:|" * len(trees))
    beyond = [statistics.median(r["wall"] / args.rounds - args.window for r in runs[t]) for t in trees]
    print("| wall beyond the window | " + " | ".join(f"{b:.2f}" for b in beyond) + " |")
    for step in steps:
        cells = [statistics.median(r["seconds"].get(step, 0.0) / args.rounds for r in runs[t]) for t in trees]
        print(f"| {step} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
