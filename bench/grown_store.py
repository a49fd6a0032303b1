"""Cost flat as the crawl grows: the same crawl rounds against stores that already know N URLs.

    .venv/bin/python bench/grown_store.py [--sizes 100000,1000000] [--hosts 300] [--window 20]
                                          [--delay 0.5] [--dir DIR] [--keep]
                                          [--originals-every 10] [--commit-log]

For each size N, a fresh embedded store is filled with N known URLs the way
``drum_scale.py`` fills it (``queue_new_urls`` in batches: a seen-set row and a frontier
row each). Their due times start in January 2027 and spread over 30 days, so none is due
while the rounds run: the frontier and the seen set are N rows larger, the work due is
the same. Every ``--originals-every``-th of them (default 10) is also a stored original
in the content tables (:func:`fill_content`: its ``content`` row and its ``simhash`` rows,
as content seen writes them), so content seen's joins read a grown set too.

Then, against a fresh simweb (same seed, same port: the same web for every size), two
rounds run, each as its own ``beamcrawl_round.py`` process measured from outside
(``harness.run_measured``: CPU of the process tree, Beam's start-up included, and peak
RSS): round 1 from the hosts' roots, round 2 from what round 1 queued. Around each round
the select stage's scan is timed alone on the same store (every frontier row due by now,
read and decoded as ``transforms/select.py`` reads it), and so is the count of frontier
rows that every round's report makes after its commit (``pipelines/launch.py``:
``Store.count_rows``, on the embedded store one SQL count of the key index).

With ``--commit-log`` every process of a round logs its store's write transactions
(``store_locks.py``'s hook), and a second table sums them by table: what each size's
writes held SQLite's one writer for.

A shared machine's speed moves by a third within minutes, and the sizes run minutes apart
(the fill of 10 M takes some 13 minutes), so each round's CPU is also weighed second by
second by the machine's speed then (``harness.RunMeasure.weighted_cpu``, in calibration
pieces, as ``compare.py`` weighs it), and the ratio given both ways.

Prints a JSON line per round and a table per size, then the ratio of CPU ms a page at
the largest size to the smallest (the goal of #25: at most 1.2×). Not collected by pytest;
run it by hand on a quiet machine (``nice`` on a shared one).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from drum_scale import fill, url_of  # noqa: E402
from harness import free_port, run_measured, simweb_on_port  # noqa: E402
from store_locks import LOG_ENV, SITECUSTOMIZE, read_commits  # noqa: E402

from beamcrawl.core.urls.urlnorm import fingerprint  # noqa: E402
from beamcrawl.schemas.records import FrontierEntry, fp_key, frontier_key  # noqa: E402
from beamcrawl.simweb.names import host_names  # noqa: E402
from beamcrawl.state.simhash_layout import simhash_layout  # noqa: E402
from beamcrawl.stores.embedded import EmbeddedStore  # noqa: E402
from beamcrawl.stores.interface import Mutation  # noqa: E402
from beamcrawl.transforms.content_seen import Probe  # noqa: E402
from beamcrawl.state.content_rows import (  # noqa: E402
    CONTENT_TABLE,
    SIMHASH_TABLE,
    ContentRecord,
    simhash_cells,
    sorted_run,
)

CONTENT_BATCH = 2_000  # originals a write: ~42,000 rows, as content seen's flushes


def fill_content(path: Path, n: int, every: int, seed: int = 11) -> dict[str, float]:
    """Records every ``every``-th of the ``n`` known URLs as a stored original, as content
    seen records a new one (its ``content`` row and a ``simhash`` row in each table of the
    layout the store records, ten on this store; written by a round 0 so every later round
    uses them): random checksums and simhashes, which no
    simweb page matches, so the rounds' probes read them and find nothing, as a grown
    crawl's mostly do."""
    rng = random.Random(seed)
    store = EmbeddedStore(str(path))
    t0 = time.perf_counter()
    originals = 0
    try:
        layout = simhash_layout(store)  # what the rounds will read: recorded before any row
        ids = range(0, n, every)
        for start in range(0, len(ids), CONTENT_BATCH):
            content, hashes = [], []
            for i in ids[start : start + CONTENT_BATCH]:
                url = url_of(i)
                probe = Probe(
                    url, fingerprint(url), rng.getrandbits(64), rng.getrandbits(64), 1.7e9, "sha1:" + "A" * 32
                )
                record = ContentRecord(url, "exact", probe.fetched_at, probe.digest, 0, 0)
                content.append(Mutation.set(fp_key(probe.checksum), record.to_cells()))
                hashes.extend(simhash_cells(probe, 0, layout))
            store.mutate(SIMHASH_TABLE, sorted_run(hashes))
            store.mutate(CONTENT_TABLE, sorted_run(content))
            originals += len(content)
    finally:
        store.close()
    seconds = time.perf_counter() - t0
    return {"originals": originals, "content_fill_s": seconds}


def time_scans(path: Path) -> dict[str, float]:
    """The select stage's due scan and the report's frontier count, each timed alone."""
    store = EmbeddedStore(str(path))
    try:
        now_ms = int(time.time() * 1000)
        t0 = time.perf_counter()
        due = 0
        for _key, cells in store.read_range("frontier", b"", frontier_key(now_ms + 1, 0)):
            FrontierEntry.from_cells(cells)
            due += 1
        select_s = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        rows = store.count_rows("frontier")  # what pipelines/launch.py counts after each commit
        count_s, count_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    finally:
        store.close()
    return {"due_rows": due, "select_s": select_s, "frontier_rows": rows, "frontier_count_s": count_s,
            "frontier_count_cpu_s": count_cpu_s}  # fmt: skip


def _logging_commits(folder: Path) -> dict[str, str]:
    """The environment of a round whose every process logs its store's write transactions
    into ``folder`` (``store_locks.py``'s hook, loaded by a ``sitecustomize`` put first on
    ``PYTHONPATH``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), str(BENCH.parent), env.get("PYTHONPATH")]))
    env[LOG_ENV] = str(folder)
    return env


def writes_by_table(commits: list[tuple[int, str, float, float, float, int]]) -> dict[str, dict[str, float]]:
    """A round's write transactions summed by table: how many, their cells, and the seconds
    they held SQLite's write lock (its own time for the rows: B-tree pages, the WAL) and
    waited for it, over all the round's processes."""
    out: dict[str, dict[str, float]] = {}
    for _pid, table, _began, waited, held, cells in commits:
        t = out.setdefault(table, {"transactions": 0, "cells": 0, "held_s": 0.0, "waited_s": 0.0})
        t["transactions"] += 1
        t["cells"] += cells
        t["held_s"] = round(t["held_s"] + held, 6)
        t["waited_s"] = round(t["waited_s"] + waited, 6)
    return out


def run_size(args: argparse.Namespace, base: Path, n: int, port: int, seeds: Path) -> list[dict[str, Any]]:
    """Fills a store with ``n`` known URLs, then runs and measures the rounds on it."""
    out = base / f"crawl-{n}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    store_path = out / "store.sqlite"
    print(f"filling {n:,} known URLs into {store_path}", flush=True)
    filled = fill(store_path, n)
    print(
        f"  {filled['fill_s']:.0f} s, {filled['fill_us_per_url']:.1f} µs a URL, {filled['bytes'] / 1e9:.2f} GB",
        flush=True,
    )
    if args.originals_every:
        content = fill_content(store_path, n, args.originals_every)
        filled.update(content)
        print(f"  {content['originals']:,} stored originals in {content['content_fill_s']:.0f} s", flush=True)
    script = str(BENCH / "beamcrawl_round.py")
    common = ["--out", str(out), "--window", str(args.window), "--delay", str(args.delay),
              "--hosts-in-flight", str(args.hosts), "--crawl-delay-cap", "2"]  # fmt: skip
    rows = []
    with simweb_on_port(
        base, port, hosts=args.hosts, seed=args.seed, pages_per_host=args.pages_per_host, log_name=f"web-{n}.jsonl"
    ) as web:
        for round_no in (1, 2):
            before = time_scans(store_path)
            report_path = base / f"round-{n}-{round_no}.json"
            extra = ["--seeds", str(seeds)] if round_no == 1 else []
            commit_log = base / f"commits-{n}-{round_no}" if args.commit_log else None
            m = run_measured(
                f"round-{n}-{round_no}",
                [sys.executable, script, *common, *extra, "--report-out", str(report_path)],
                log_dir=base, timeout=args.window + 900, server_pid=web.process.pid, cwd=base,
                env=_logging_commits(commit_log) if commit_log else None,
            )  # fmt: skip
            if m.returncode != 0:
                raise SystemExit(f"round {round_no} at {n:,} failed ({m.returncode}); see {m.stderr}")
            report = json.loads(report_path.read_text())[-1]
            pages = report["responses"]
            row = {
                "n": n, "round": round_no, "pages": pages, "cpu_s": m.cpu, "wall_s": m.wall,
                "cpu_ms_page": m.cpu * 1000 / max(pages, 1), "peak_rss_mb": m.peak_rss / 1e6,
                "round_seconds": report["seconds"], "new_urls": report["new_urls"],
                "frontier_size": report["frontier_size"], "other_cpu_s": m.other_cpu,
                "select": before, "fill_s": filled["fill_s"], "originals": filled.get("originals", 0),
                "calibration": m.calibration, "weighted_cpu": m.weighted_cpu,
                "pieces_a_page": m.weighted_cpu / max(pages, 1),
            }  # fmt: skip
            if commit_log:
                row["writes"] = writes_by_table(read_commits(str(commit_log)))
            print(f"  {json.dumps(row)}", flush=True)
            rows.append(row)
        audit = web.audit(min_delay=args.delay)
    violations = audit.robots_violations + audit.overlaps + audit.short_gaps
    for row in rows:
        row["politeness_violations"] = violations
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="known-URL counts, comma-separated")
    parser.add_argument("--hosts", type=int, default=300, help="simweb hosts (also hosts in flight)")
    parser.add_argument("--pages-per-host", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=3, help="simweb seed")
    parser.add_argument("--window", type=float, default=20.0, help="round window in seconds")
    parser.add_argument("--delay", type=float, default=0.5, help="fixed per-host delay in seconds")
    parser.add_argument("--dir", default=None, help="work folder (default: a temp dir)")
    parser.add_argument(
        "--originals-every",
        type=int,
        default=10,
        help="also store every K-th known URL as an original in the content tables (0: none)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the crawls' folders")
    parser.add_argument(
        "--commit-log",
        action="store_true",
        help="log every write transaction of the rounds (store_locks.py's hook) and print them by table",
    )
    args = parser.parse_args(argv)
    base = Path(args.dir or tempfile.mkdtemp(prefix="grown-store-"))
    base.mkdir(parents=True, exist_ok=True)
    port = free_port()
    seeds = base / "seeds.txt"
    seeds.write_text("".join(f"http://{h}:{port}/\n" for h in host_names(args.hosts, args.seed)))
    load = os.getloadavg()
    print(f"work folder {base}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    results: list[dict[str, Any]] = []
    for n in (int(s) for s in args.sizes.split(",")):
        results += run_size(args, base, n, port, seeds)
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(
        "| known URLs | round | pages | CPU s | CPU ms a page | weighed: pieces a page | peak RSS MB | round s | "
        "select: due rows, s | frontier count: rows, s | other CPU s | politeness violations |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        s = r["select"]
        print(
            f"| {r['n']:,} | {r['round']} | {r['pages']:,} | {r['cpu_s']:.1f} | {r['cpu_ms_page']:.2f} "
            f"| {r['pieces_a_page']:.3f} "
            f"| {r['peak_rss_mb']:.0f} | {r['round_seconds']:.1f} | {s['due_rows']:,}, {s['select_s']:.2f} "
            f"| {s['frontier_rows']:,}, {s['frontier_count_s']:.2f} | {r['other_cpu_s']:.1f} "
            f"| {r['politeness_violations']} |"
        )
    if args.commit_log:
        print("\n| known URLs | round | table | transactions | cells | held s | held µs a cell | waited s |")
        print("|---:|---:|---|---:|---:|---:|---:|---:|")
        for r in results:
            for table, w in sorted(r["writes"].items(), key=lambda tw: -tw[1]["held_s"]):
                per_cell = 1e6 * w["held_s"] / w["cells"] if w["cells"] else 0.0
                print(
                    f"| {r['n']:,} | {r['round']} | {table} | {w['transactions']:,} | {w['cells']:,} "
                    f"| {w['held_s']:.2f} | {per_cell:.1f} | {w['waited_s']:.2f} |"
                )
    sizes = sorted({r["n"] for r in results})
    if len(sizes) > 1:
        for round_no in (1, 2):
            small = next(r for r in results if r["n"] == sizes[0] and r["round"] == round_no)
            large = next(r for r in results if r["n"] == sizes[-1] and r["round"] == round_no)
            weighed = large["pieces_a_page"] / small["pieces_a_page"] if small["pieces_a_page"] else float("nan")
            print(
                f"round {round_no}: CPU ms a page at {sizes[-1]:,} / at {sizes[0]:,}: "
                f"{large['cpu_ms_page'] / small['cpu_ms_page']:.2f}×, weighed by the machine's speed "
                f"each second {weighed:.2f}× (goal: at most 1.2×)"
            )
    if not args.keep and not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
