"""What a write at a random key costs the embedded store as the crawl grows.

    .venv/bin/python bench/store_growth.py [--sizes 100000,1000000,10000000]
                                           [--runs 143] [--run 1476] [--dir DIR]
                                           [--pages 0] [--hold-bytes 0,6291456,12582912]

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

The defaults are round 2 of ``grown_store.py`` (211,068 new URLs in 143 runs). Then, with
``--pages``, the URL state of that many fetched pages (known URLs drawn at random, each row
the three cells ``record.url_state_cells`` writes, of their usual sizes) goes through the
record stage's own writer (``_WriteRowsFn`` of ``transforms/record.py``) in page batches of
1,000, one bundle, for each of ``--hold-bytes``: 0 writes each batch as it comes (as before
d2ed31d); a size holds that many bytes of rows and writes them as sorted runs
(``URL_ROWS_HELD`` is the round's). Everything is measured from inside the process:

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
machine. A 10 M fill takes 7-9 minutes and 2.7 GB of disk. The URL state alone, at about
the size of a full-size round's store:

    .venv/bin/python bench/store_growth.py --sizes 700000 --runs 1 --pages 40000
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from beamcrawl.core.urls.urlnorm import fingerprint
from beamcrawl.schemas.records import OUTCOME_CELL, REVISIT_CELL, fp_key
from beamcrawl.stores.embedded import EmbeddedStore
from beamcrawl.transforms.record import DUPLICATE_CELL, URL_ROWS_HELD, _WriteRowsFn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from drum_scale import fill, url_of  # noqa: E402

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

    def write() -> None:
        for cells in batches:
            store.write_cells("urls", cells)

    return costs(write, runs * run)


def costs(work: Callable[[], None], units: int) -> dict[str, Any]:
    """Runs ``work()`` once; its CPU (user, system), wall time, syscalls and bytes written
    (where ``/proc/self/io`` exists), each a unit of ``units``."""
    io0, r0, t0 = proc_io(), resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    work()
    wall = time.perf_counter() - t0
    r1, io1 = resource.getrusage(resource.RUSAGE_SELF), proc_io()
    out: dict[str, Any] = {
        "keys": units,
        "user_us": 1e6 * (r1.ru_utime - r0.ru_utime) / units,
        "sys_us": 1e6 * (r1.ru_stime - r0.ru_stime) / units,
        "wall_us": 1e6 * wall / units,
    }
    if io0 and io1:
        out["reads"] = (io1["syscr"] - io0["syscr"]) / units
        out["writes"] = (io1["syscw"] - io0["syscw"]) / units
        out["written_kib"] = (io1["wchar"] - io0["wchar"]) / units / 1024
    return out


PAGE_BATCH = 1000  # pages in a batch after content seen


def url_state_rows(n: int, pages: int, seed: int) -> list[tuple[bytes, dict[str, bytes]]]:
    """The URL-state rows of ``pages`` fetched pages among ``n`` known URLs (drawn at random,
    as a round fetches them): the three cells of ``record.url_state_cells``, at their sizes."""
    rng = random.Random(seed)
    cells = {OUTCOME_CELL: rng.randbytes(86), REVISIT_CELL: rng.randbytes(201), DUPLICATE_CELL: b"null"}
    return [(fp_key(fingerprint(url_of(i))), cells) for i in rng.sample(range(n), min(pages, n))]


def write_url_state(path: Path, rows: list[tuple[bytes, dict[str, bytes]]], hold_bytes: int) -> dict[str, Any]:
    """Writes ``rows`` through the record stage's writer in page batches, as one bundle."""
    fn = _WriteRowsFn("sqlite://" + str(path), "urls", hold_bytes)
    fn.setup()
    fn.store.read_keys("urls", [b"\0"])  # the connection opened outside the measurement
    letters: list[Any] = []

    def write() -> None:
        fn.start_bundle()
        for at in range(0, len(rows), PAGE_BATCH):
            letters.extend(fn.process(rows[at : at + PAGE_BATCH]))
        letters.extend(fn.finish_bundle())

    try:
        out = costs(write, len(rows))
    finally:
        fn.teardown()
    if letters:
        raise RuntimeError(f"{len(letters)} URL-state rows refused: {letters[0]}")
    return out


def _remove(path: Path) -> None:
    for f in path.parent.glob(path.name + "*"):  # the file, its WAL and shared memory
        f.unlink()


def measure(
    base: Path, n: int, runs: int, run: int, seed: int, pages: int = 0, holds: tuple[int, ...] = ()
) -> list[dict[str, Any]]:
    """Fills a fresh store with ``n`` known URLs, then measures the new keys' runs in each
    order and, with ``pages``, the URL state held by each of ``holds`` bytes, every one on
    its own copy of the filled store (so none writes into a table another has grown)."""
    filled_path = base / f"store-{n}.sqlite"
    _remove(filled_path)
    filled = fill(filled_path, n)  # closed: checkpointed, no WAL left beside it
    known = url_state_rows(n, pages, seed) if pages else []
    jobs = [("order", order) for order in ORDERS] + [("hold", hold) for hold in holds if known]
    rows = []
    try:
        for kind, value in jobs:
            path = base / f"store-{n}-{kind}-{value}.sqlite"
            _remove(path)
            shutil.copyfile(filled_path, path)
            os.sync()  # the fill's and the copy's dirty pages written back before the measurement
            row = {"n": n, kind: value, "fill_s": filled["fill_s"], "file_gb": filled["bytes"] / 1e9}
            try:
                if kind == "order":
                    store = EmbeddedStore(str(path))
                    try:
                        row.update(write_runs(store, runs, run, seed, str(value)))
                    finally:
                        store.close()
                else:
                    row.update(write_url_state(path, known, int(value)))
            finally:
                _remove(path)
            rows.append(row)
    finally:
        _remove(filled_path)
    return rows


def _io_cells(r: dict[str, Any]) -> str:
    if "reads" not in r:
        return "n/a | n/a | n/a"
    return f"{r['reads']:.2f} | {r['writes']:.2f} | {r['written_kib']:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="known-URL counts, comma-separated")
    parser.add_argument("--runs", type=int, default=143, help="runs written at each size, in each order")
    parser.add_argument("--run", type=int, default=1476, help="keys a run (URL seen's ~211 k new URLs / 143)")
    parser.add_argument("--pages", type=int, default=0, help="also write the URL state of this many fetched pages")
    parser.add_argument(
        "--hold-bytes",
        default=f"0,{URL_ROWS_HELD},{2 * URL_ROWS_HELD}",
        help="with --pages: bytes of URL-state rows held for a sorted run, comma-separated (0: none)",
    )
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--dir", default=None, help="work folder (default: a temp dir, removed at the end)")
    args = parser.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        holds = tuple(int(s) for s in args.hold_bytes.split(","))
    except ValueError:
        parser.error(f"--sizes {args.sizes!r}, --hold-bytes {args.hold_bytes!r}: numbers, comma-separated")
    if any(n < 1 for n in sizes) or args.runs < 1 or args.run < 1:
        parser.error("--sizes, --runs and --run must be at least 1")
    if args.pages < 0 or any(h < 0 for h in holds):
        parser.error("--pages and --hold-bytes must be at least 0")
    base = Path(args.dir or tempfile.mkdtemp(prefix="store-growth-"))
    base.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for n in sizes:
            print(f"filling {n:,} known URLs ...", flush=True)
            for row in measure(base, n, args.runs, args.run, args.seed, args.pages, holds):
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
    for r in (r for r in rows if "order" in r):
        print(
            f"| {r['n']:,} | {r['order']} | {r['file_gb']:.2f} | {r['user_us']:.1f} | {r['sys_us']:.1f} "
            f"| {r['wall_us']:.1f} | {_io_cells(r)} |"
        )
    if len(set(sizes)) > 1:
        print()
        for order in ORDERS:
            small, large = (
                next(r for r in rows if r["n"] == n and r.get("order") == order) for n in (min(sizes), max(sizes))
            )
            cpu = (large["user_us"] + large["sys_us"]) / max(small["user_us"] + small["sys_us"], 1e-9)
            print(f"{order}: CPU a key at {large['n']:,} / at {small['n']:,}: {cpu:.2f}×")
    held = [r for r in rows if "hold" in r]
    if held:
        print(
            f"\nThe URL state of {held[0]['keys']:,} fetched pages, in batches of {PAGE_BATCH:,}, "
            "through the record stage's writer\n"
        )
        print(
            "| known URLs | rows held, bytes | CPU µs a page: user | system | wall µs a page "
            "| read syscalls a page | write syscalls a page | KiB written a page |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in held:
            print(
                f"| {r['n']:,} | {r['hold']:,} | {r['user_us']:.1f} | {r['sys_us']:.1f} "
                f"| {r['wall_us']:.1f} | {_io_cells(r)} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
