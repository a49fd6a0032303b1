"""Flat memory: a long round's peak RSS against a short one's, each round in a fresh process
from the same warmed store.

``memory_timeline.py`` measures its round in the process that ran the cold round and the
warm-ups, so the round's start carries their allocators' arenas (two runs of one tree started
100+ MB apart), and the two rounds of a flat pair start from different frontiers. Here simweb
and the warm-up rounds run once; the warmed output folder (the embedded store inside) is copied
aside; each measured round runs in a process of its own (``memory_timeline.py --round-of``) on
the folder restored from that copy. Every round starts from the same frontier, seen set and
host clocks, and its start RSS is only the imports, Beam and the store's opening. The windows
run in turns (``--runs`` times: 60, 180, 60, 180, ...).

    python bench/flat_memory.py [--hosts 3000] [--windows 60,180] [--runs 1] [--mp]

Prints each round's measurement (``memory_timeline.py``'s tables), then one row a round (its
pages, RSS at its start and its peak, KB a page above the start) and *flat*: the longest
window's peak over the shortest's (issue #25's goal: at most 1.1x for 180 s against 60 s).
With ``--mp`` a round's RSS is its process's and its two SDK workers'.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from statistics import mean
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from memory_timeline import MEASURED  # noqa: E402
from stage_timeline import warmed_store  # noqa: E402

__all__ = ["flat", "main", "measure_in_child", "parse_windows", "restore"]


def parse_windows(text: str) -> list[float]:
    """``"60,180"`` as two windows, shortest first.

    Raises:
        argparse.ArgumentTypeError: fewer than two windows, or one not a positive number.
    """
    try:
        windows = sorted(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"windows must be seconds separated by commas, not {text!r}") from None
    if len(windows) < 2 or windows[0] <= 0:
        raise argparse.ArgumentTypeError(f"at least two positive windows are needed, not {text!r}")
    return windows


def restore(snapshot: Path, out: Path) -> None:
    """Replaces the output folder ``out`` with the copy ``snapshot`` (same path: the folder and
    its store keep naming each other)."""
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(snapshot, out)


# Runs a script with ``beamcrawl`` imported from the tree in argv[1] rather than from this
# checkout (the editable install's finder would take it first): a tree to compare against.
_FROM_TREE = (
    "import sys, runpy; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]; "
    "tree = sys.argv.pop(1); sys.path.insert(0, tree); sys.argv = sys.argv[1:]; import beamcrawl; "
    "print('beamcrawl from', beamcrawl.__file__, flush=True); runpy.run_path(sys.argv[0], run_name='__main__')"
)


def measure_in_child(
    out: Path,
    args: argparse.Namespace,
    window: float,
    tree: Path | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One round of ``window`` seconds on ``out`` in a fresh ``memory_timeline.py --round-of``
    process; its tables go to stdout, its figures are returned, with the CPU seconds the
    process used (``cpu_s``). ``tree``: another checkout (its compiled modules built) whose
    ``beamcrawl`` and bench run the round; ``env``: variables set for the round's process.

    Raises:
        RuntimeError: the child failed or printed no figures.
    """
    bench = BENCH if tree is None else tree / "bench"
    cmd = [
        str(bench / "memory_timeline.py"), "--round-of", str(out),
        "--hosts", str(args.hosts), "--delay", str(args.delay), "--window", str(window), "--top", str(args.top),
    ]  # fmt: skip
    if args.mp:
        cmd.append("--mp")
    cmd = [sys.executable, *(["-c", _FROM_TREE, str(tree)] if tree is not None else []), *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE, text=True, cwd=bench.parent, check=False, env={**os.environ, **(env or {})}
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = [line for line in proc.stdout.splitlines() if line.startswith(MEASURED + " ")]
    print(f"\n### A {window:g} s round in its own process\n")
    print("\n".join(line for line in proc.stdout.splitlines() if not line.startswith(MEASURED + " ")), flush=True)
    if proc.returncode != 0 or not figures:
        raise RuntimeError(f"the {window:g} s round's process failed (exit {proc.returncode})")
    result: dict[str, Any] = json.loads(figures[-1][len(MEASURED) + 1 :])
    result["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result


def flat(rounds: list[dict[str, Any]]) -> float:
    """The mean peak of the longest window's rounds over the shortest window's."""
    windows = sorted({r["window"] for r in rounds})
    short = mean(r["peak_mb"] for r in rounds if r["window"] == windows[0])
    long = mean(r["peak_mb"] for r in rounds if r["window"] == windows[-1])
    return long / short if short else 0.0


def table(rounds: list[dict[str, Any]]) -> str:
    """One Markdown row a round, in the order they ran."""
    lines = [
        "| run | window s | pages | URLs due | round s | RSS start MB | peak MB | KB a page above the start |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(rounds, 1):
        above = (r["peak_mb"] - r["start_mb"]) * 1024 / max(r["pages"], 1)
        lines.append(
            f"| {i} | {r['window']:g} | {r['pages']:,} | {r['urls_due']:,} | {r['seconds']:.1f} | "
            f"{r['start_mb']:,.0f} | {r['peak_mb']:,.0f} | {above:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=3000)
    p.add_argument("--windows", type=parse_windows, default=[60.0, 180.0], help="measured windows, s (comma-separated)")
    p.add_argument("--runs", type=int, default=1, help="rounds of each window, in turns")
    p.add_argument("--warmup-window", type=float, default=40.0)
    p.add_argument("--warmup-rounds", type=int, default=2, help="warm-up rounds after the cold one")
    p.add_argument("--delay", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--mp", action="store_true", help="multi_processing with two workers (RSS summed)")
    p.add_argument("--top", type=int, default=12, help="stages shown a round")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")

    with warmed_store(args, "beamcrawl-flat-") as (_web, out_folder):
        out = Path(out_folder)
        snapshot = out.with_name("warmed")
        shutil.copytree(out, snapshot)
        rounds = []
        for _ in range(args.runs):
            for window in args.windows:
                restore(snapshot, out)
                rounds.append(measure_in_child(out, args, window))
    shutil.rmtree(out.parent, ignore_errors=True)  # the server's log, the folder and its copy
    print("\n### Each round from the same warmed store, in a process of its own\n")
    print(table(rounds))
    short, long = args.windows[0], args.windows[-1]
    print(f"\nflat: the {long:g} s rounds' peak over the {short:g} s rounds' = {flat(rounds):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
