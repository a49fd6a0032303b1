"""What a write at a random key costs the embedded store as the crawl grows.

    .venv/bin/python bench/store_growth.py [--sizes 100000,1000000,10000000]
                                           [--runs 143] [--run 1476] [--dir DIR]

For each size N (known URLs), a fresh embedded store is filled the way the crawl fills it
(``drum_scale.fill``: every known URL's seen-set row in ``urls`` and its frontier row). Then
``--runs`` runs of ``--run`` new random fingerprints have their seen-set cells written through
``Store.write_cells`` (the call URL seen's new URLs and content seen's rows take: one
transaction a run, ``INSERT OR REPLACE`` into a ``WITHOUT ROWID`` B-tree keyed by the
fingerprint), in two orders, each on its own copy of the filled store:

- **sorted**: all the new keys sorted, then cut into runs, as URL seen writes a round's new
  URLs (bucket after bucket, each in key order): a run covers a slice of the key space, so
  its keys share the leaves of that slice when the table is small;
- **spread**: each run sorted but drawn from the whole key space (no bucketing): the most
  leaves a run can dirty.

The defaults are round 2 of ``grown_store.py`` (211,147 new URLs in 143 runs). The runs are
measured from inside the process, over all of them:

- CPU a key, in user and in system time (``getrusage``): SQLite's own work and Python's
  binding, against the kernel's for the file I/O;
- the syscalls that read and wrote a key (``syscr`` and ``syscw`` of ``/proc/self/io``, Linux
  only: the page reads past SQLite's cache, the WAL frames, each a header and a page, the
  checkpoints' reads of the WAL and writes into the file) and the KiB it wrote
  (``wchar``: bytes handed to ``write``/``pwrite``, cached or not);
- wall time a key.

A run of ``--run`` keys into a small table shares its B-tree leaves (the keys of one run fall
on fewer pages than there are keys); into a large one each key dirties a leaf page of its
own, which the WAL then holds and the checkpoint copies back: that is the growth this bench
is for. Not collected by pytest (a smoke test runs it tiny); run it by hand on a quiet
machine. A 10 M fill takes 7-9 minutes and 2.7 GB of disk.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from beamcrawl.schemas.records import fp_key
from beamcrawl.stores.embedded import EmbeddedStore

sys.path.insert(0, str(Path(__file__).resolve().parent))

from drum_scale import fill  # noqa: E402

QUEUED_CELL = "u:q"  # the seen set's one cell a new URL (state/frontier.py's QUEUED_CELL)
VALUE_BYTES = 70  # about a queued cell's size: URL, first-seen time, source, depth


def proc_io() -> dict[str, int]:
    """This process's I/O counters (``/proc/self/io``), or {} where there are none."""
    try:
        text = Path("/proc/self/io").read_text()
    except OSError:
        return {}
    return {name: int(value) for name, _, value in (line.partition(": ") for line in text.splitlines())}


ORDERS = ("sorted", "spread")


def new_runs(runs: int, run: int, order: str, seed: int) -> list[list[int]]:
    """``runs`` runs of ``run`` random fingerprints, each in key order: cut from one sorted
    list (``sorted``) or each drawn on its own from the whole key space (``spread``)."""
    rng = random.Random(seed)
    if order == "sorted":
        fps = sorted(rng.getrandbits(64) for _ in range(runs * run))
        return [fps[i : i + run] for i in range(0, len(fps), run)]
    if order == "spread":
        return [sorted(rng.getrandbits(64) for _ in range(run)) for _ in range(runs)]
    raise ValueError(f"unknown order {order!r}: one of {', '.join(ORDERS)}")


def write_runs(store: EmbeddedStore, runs: int, run: int, seed: int, order: str = "sorted") -> dict[str, Any]:
    """Writes ``runs`` runs of ``run`` new random keys' seen-set cells; their costs."""
    value = bytes(random.Random(seed).getrandbits(8) for _ in range(VALUE_BYTES))
    batches = [[(fp_key(fp), QUEUED_CELL, value) for fp in fps] for fps in new_runs(runs, run, order, seed)]
    store.read_keys("urls", [b"\0"])  # the connection opened outside the measurement
    io0, r0, t0 = proc_io(), resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for cells in batches:
        store.write_cells("urls", cells)
    wall = time.perf_counter() - t0
    r1, io1 = resource.getrusage(resource.RUSAGE_SELF), proc_io()
    keys = runs * run
    out: dict[str, Any] = {
        "keys": keys,
        "user_us": 1e6 * (r1.ru_utime - r0.ru_utime) / keys,
        "sys_us": 1e6 * (r1.ru_stime - r0.ru_stime) / keys,
        "wall_us": 1e6 * wall / keys,
    }
    if io0 and io1:
        out["reads"] = (io1["syscr"] - io0["syscr"]) / keys
        out["writes"] = (io1["syscw"] - io0["syscw"]) / keys
        out["written_kib"] = (io1["wchar"] - io0["wchar"]) / keys / 1024
    return out


def _remove(path: Path) -> None:
    for f in path.parent.glob(path.name + "*"):  # the file, its WAL and shared memory
        f.unlink()


def measure(base: Path, n: int, runs: int, run: int, seed: int) -> list[dict[str, Any]]:
    """Fills a fresh store with ``n`` known URLs, then measures the runs in each order on a
    copy of it (so neither order writes into a table the other has grown)."""
    filled_path = base / f"store-{n}.sqlite"
    _remove(filled_path)
    filled = fill(filled_path, n)  # closed: checkpointed, no WAL left beside it
    rows = []
    try:
        for order in ORDERS:
            path = base / f"store-{n}-{order}.sqlite"
            _remove(path)
            shutil.copyfile(filled_path, path)
            os.sync()  # the fill's and the copy's dirty pages written back before the measurement
            store = EmbeddedStore(str(path))
            try:
                row = {"n": n, "order": order, "fill_s": filled["fill_s"], "file_gb": filled["bytes"] / 1e9}
                row.update(write_runs(store, runs, run, seed, order))
            finally:
                store.close()
                _remove(path)
            rows.append(row)
    finally:
        _remove(filled_path)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="known-URL counts, comma-separated")
    parser.add_argument("--runs", type=int, default=143, help="runs written at each size, in each order")
    parser.add_argument("--run", type=int, default=1476, help="keys a run (URL seen's ~211 k new URLs / 143)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--dir", default=None, help="work folder (default: a temp dir, removed at the end)")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes {args.sizes!r}: known-URL counts, comma-separated")
    if any(n < 1 for n in sizes) or args.runs < 1 or args.run < 1:
        parser.error("--sizes, --runs and --run must be at least 1")
    base = Path(args.dir or tempfile.mkdtemp(prefix="store-growth-"))
    base.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for n in sizes:
            print(f"filling {n:,} known URLs ...", flush=True)
            for row in measure(base, n, args.runs, args.run, args.seed):
                print(f"  {row}", flush=True)
                rows.append(row)
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    print(f"\n{args.runs} runs of {args.run:,} new keys at each size, one transaction a run\n")
    print(
        "| known URLs | order | file GB | CPU µs a key: user | system | wall µs a key "
        "| read syscalls a key | write syscalls a key | KiB written a key |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        io = f"{r['reads']:.2f} | {r['writes']:.2f} | {r['written_kib']:.1f}" if "reads" in r else "n/a | n/a | n/a"
        print(
            f"| {r['n']:,} | {r['order']} | {r['file_gb']:.2f} | {r['user_us']:.1f} | {r['sys_us']:.1f} "
            f"| {r['wall_us']:.1f} | {io} |"
        )
    if len(set(sizes)) > 1:
        print()
        for order in ORDERS:
            small, large = (
                next(r for r in rows if r["n"] == n and r["order"] == order) for n in (min(sizes), max(sizes))
            )
            cpu = (large["user_us"] + large["sys_us"]) / max(small["user_us"] + small["sys_us"], 1e-9)
            print(f"{order}: CPU a key at {large['n']:,} / at {small['n']:,}: {cpu:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
