"""A against B: the same warmed store, one round at a time in a fresh process, two variants in
turns; each round's peak RSS, pages and CPU a page.

A round's peak and CPU vary from run to run by more than most single changes move them (the
machine's speed, how many pages the window fetched). Here simweb and the warm-up rounds run
once, as in ``flat_memory.py``; then every measured round starts from the restored copy of the
warmed output folder, in a process of its own (``memory_timeline.py --round-of``), the
variants in the order ``--order`` gives (``ABBA``: each variant once early and once late).

- A is this checkout as it is.
- B is another checkout (``--tree PATH``: a ``git worktree`` of the commit before, with the
  compiled modules copied in, ``beamcrawl`` imported from it rather than from this checkout's
  editable install), or this one with environment variables set (``--env NAME=VALUE``).

    git worktree add --detach /tmp/before HEAD~1
    for so in $(find beamcrawl -name '*.so'); do cp "$so" "/tmp/before/$so"; done
    python bench/round_ab.py --tree /tmp/before           # 3,000 hosts, 60 s rounds, ~13 min
    python bench/round_ab.py --env ARROW_DEFAULT_MEMORY_POOL=system
    python bench/round_ab.py --tree /tmp/before --mp     # on two SDK workers

With ``--mp`` each round runs on two SDK worker processes and its RSS is the three processes'
sum. The runner starts them as ``python -m`` in its own working directory, which for B's
rounds of a ``--tree`` is the tree: they import the tree's ``beamcrawl`` as the runner does.

Prints each round's measurement (``memory_timeline.py``'s tables: each stage's RSS, the
allocators after it), then a row a round: pages, URLs due, the round's seconds, RSS at its start
and peak, KB a page above the start, and the CPU its process used a page (all in: the round's
start, the fetch, the stages after it, the commit). Compare rounds of like page counts: a round
that fetched more pages holds more in its last stages.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from flat_memory import measure_in_child, restore  # noqa: E402
from stage_timeline import add_round_arguments, warmed_store  # noqa: E402

__all__ = ["main", "parse_env", "parse_order", "table"]


def parse_order(text: str) -> str:
    """``"ABBA"``: the variants' turns; only A and B, each at least once.

    Raises:
        argparse.ArgumentTypeError: another letter, or a variant that never runs.
    """
    order = text.strip().upper()
    if not order or set(order) - {"A", "B"} or len(set(order)) < 2:
        raise argparse.ArgumentTypeError(f"the order is A and B in turns, each at least once (ABBA), not {text!r}")
    return order


def parse_env(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` as a pair.

    Raises:
        argparse.ArgumentTypeError: no ``=`` or no name.
    """
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"an environment variable is NAME=VALUE, not {text!r}")
    return name.strip(), value


def _by_process(r: dict[str, Any]) -> str:
    """With two workers: the peak's processes (runner, then its children), MB."""
    split = r.get("peak_by_process_mb") or []
    return " (" + " + ".join(f"{mb:,.0f}" for mb in split) + ")" if len(split) > 1 else ""


def table(rounds: list[dict[str, Any]]) -> str:
    """One Markdown row a round, in the order they ran."""
    lines = [
        "| run | variant | pages | URLs due | round s | RSS start MB | peak MB (with --mp: runner + children) | KB a page above the start "
        "| CPU ms a page |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(rounds, 1):
        pages = max(r["pages"], 1)
        above = (r["peak_mb"] - r["start_mb"]) * 1024 / pages
        lines.append(
            f"| {i} | {r['variant']} | {r['pages']:,} | {r['urls_due']:,} | {r['seconds']:.1f} | "
            f"{r['start_mb']:,.0f} | {r['peak_mb']:,.0f}{_by_process(r)} | {above:.1f} | {1000 * r['cpu_s'] / pages:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", type=Path, help="B: another checkout, its compiled modules built")
    p.add_argument("--env", type=parse_env, action="append", default=[], help="B: NAME=VALUE set for its rounds")
    p.add_argument("--order", type=parse_order, default="ABBA", help="the variants' turns (ABBA)")
    add_round_arguments(p, "multi_processing with two workers (RSS summed; with --tree, B's workers run the tree too)")
    p.set_defaults(hosts=3000, window=60.0, warmup_window=40.0, warmup_rounds=2)  # the full-size round
    p.add_argument("--top", type=int, default=8, help="stages shown a round")
    args = p.parse_args(argv)
    if (args.tree is None) == (not args.env):
        p.error("B is either --tree PATH or --env NAME=VALUE (one or more), not both or neither")
    if args.tree is not None and not (args.tree / "beamcrawl" / "__init__.py").is_file():
        p.error(f"--tree {args.tree}: no beamcrawl package there")
    b_env = dict(args.env)

    with warmed_store(args, "beamcrawl-ab-") as (_web, out_folder):
        out = Path(out_folder)
        snapshot = out.with_name("warmed")
        shutil.copytree(out, snapshot)
        rounds = []
        for variant in args.order:
            restore(snapshot, out)
            print(f"\n## Variant {variant}", flush=True)
            if variant == "A":
                measured = measure_in_child(out, args, args.window)
            else:
                measured = measure_in_child(out, args, args.window, tree=args.tree, env=b_env)
            rounds.append({**measured, "variant": variant})
    shutil.rmtree(out.parent, ignore_errors=True)  # the server's log, the folder and its copy
    b = f"the tree {args.tree}" if args.tree is not None else " ".join(f"{k}={v}" for k, v in b_env.items())
    print(f"\n### A: this checkout; B: {b}; each round from the same warmed store, in a process of its own\n")
    print(table(rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
