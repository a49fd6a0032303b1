"""The seen set at scale: DRUM's batched sort-merge against per-URL lookups, on either store.

    .venv/bin/python bench/drum_scale.py [--store embedded|emulator] [--sizes 1000000,10000000]
                                         [--candidates 200000] [--passes 2]
                                         [--due-share 0.01] [--dir DIR] [--keep]

For each size N (known URLs), a fresh embedded store is filled the way the crawl fills it:
``url_seen.queue_new_urls`` in batches, so every known URL has its ``urls`` row (the seen set)
and its frontier row, with due times spread over 30 days. Then, each in a fresh child process
(so its peak RSS is the check's own, the store included: the embedded store lives in the
process that uses it):

- **batch**: ``candidates`` fingerprints, half of them known, checked the way the URL-seen
  stage checks them: bucket bits chosen for the seen set's size (``choose_bucket_bits``),
  the candidates combined and sorted as arrays (``combine_candidates``) and cut into
  buckets, then per bucket merged against the stored keys of the bucket's span, by a
  keys-only range scan or one key-set read, whichever ``choose_path`` says costs less, as
  sorted uint64 arrays (``seen_mask``: ``searchsorted``);
- **point**: the same candidates, one ``read_keys`` request per URL (what DRUM avoids), and
  on Bigtable also one data-client ``read_row`` per URL (what a crawler looking URLs up one
  at a time would send; the store's own read of one key is the cheaper of the two);
  each of the two runs twice, alternating, and the better time counts (the first pass
  warms the OS page cache for the second);
- **select**: the due frontier at a moment when ``due-share`` of the rows are due, read as
  the select stage reads it (one range scan from the table's start, each row decoded into
  a ``FrontierEntry``).

``--store emulator`` (or ``bigtable``) does the same against the Bigtable emulator, where a
per-URL lookup is a request, as on Cloud Bigtable: for each size a fresh emulator is started
with the project's own starter (``stores/emulator.py``), a scratch store made in it, filled
through the store interface as above, and checked by a child process that talks to it over
gRPC; ``read_keys`` of one key is one ReadRows request (what ``read_row`` sends). The table
adds the emulator's resident memory after the fill and at the end (it holds everything in
memory), and the fill time. ``--keep`` and ``--dir`` do not apply (nothing is on disk).
Per-URL requests cost about a millisecond there, so use fewer candidates (``--candidates
20000``) and one pass (``--passes 1``: there is no page cache to warm).

Both checks must find exactly the unknown half (the script exits non-zero otherwise). It
prints one line per phase, then a table. Not collected by pytest; run it by hand on a
quiet machine. A 10 M fill takes several minutes and some GB of disk.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from beamcrawl.core.urls.urlnorm import fingerprint
from beamcrawl.schemas.records import Candidate, FrontierEntry, fp_key, frontier_key
from beamcrawl.stores.base import open_store
from beamcrawl.stores.embedded import EmbeddedStore
from beamcrawl.stores.interface import Store
from beamcrawl.transforms.store_join import choose_path
from beamcrawl.transforms.url_seen import (
    bucket_lists,
    choose_bucket_bits,
    combine_candidates,
    fingerprints,
    fp_keys,
    key_chunks,
    queue_new_urls,
    seen_mask,
)

FILL_BATCH = 5_000  # one due time per batch: the finer, the closer select's due share
SPREAD_MS = 30 * 86_400_000  # due times over 30 days
T0_MS = 1_800_000_000_000
HOSTS = 100_000


def url_of(i: int) -> str:
    return f"http://h{i % HOSTS}.example/p/{i}"


def fill(path: Path | str, n: int) -> dict[str, float]:
    """Queues ``n`` URLs into a fresh store, as the URL-seen stage queues new ones.

    ``path`` is an embedded store's file, or any store URI (``bigtable://...``).
    """
    uri = str(path)
    store: Store = open_store(uri) if "://" in uri else EmbeddedStore(uri)
    t0 = time.perf_counter()
    try:
        for start in range(0, n, FILL_BATCH):
            cands = []
            for i in range(start, min(n, start + FILL_BATCH)):
                url = url_of(i)
                cands.append(Candidate(fp=fingerprint(url), url=url, host=url.split("/")[2], depth=1, priority=0.5))
            # due times spread evenly over the period, batch by batch
            now_ms = T0_MS + int(SPREAD_MS * start / n)
            queue_new_urls(store, cands, now_ms)
            if start and start % 1_000_000 == 0:
                print(f"  filled {start:,} in {time.perf_counter() - t0:.0f} s", flush=True)
    finally:
        store.close()
    seconds = time.perf_counter() - t0
    size = Path(uri).stat().st_size if "://" not in uri else 0
    return {"fill_s": seconds, "fill_us_per_url": seconds / n * 1e6, "bytes": size}


def candidates_for(n: int, count: int, seed: int = 7) -> tuple[list[Candidate], int]:
    """``count`` candidates, half known (drawn from the ``n`` filled) and half new."""
    rng = random.Random(seed)
    known = rng.sample(range(n), count // 2)
    out = [Candidate(fp=fingerprint(url_of(i)), url=url_of(i), host="h", depth=1, priority=0.5) for i in known]
    for j in range(count - len(out)):
        url = f"http://new{j % HOSTS}.example/q/{j}"
        out.append(Candidate(fp=fingerprint(url), url=url, host="h", depth=1, priority=0.5))
    rng.shuffle(out)
    return out, count - len(known)


def check_batch(
    store: Store, cands: list[Candidate], seen_rows: int, force: str = "auto"
) -> tuple[int, dict[str, int]]:
    """The URL-seen stage's join, outside Beam: combine and sort (``combine_candidates``),
    cut into buckets (``bucket_lists``), one array merge per bucket (``seen_mask``).

    ``force`` (``scan`` or ``keyset``) overrides ``choose_path`` for every bucket, to price
    the path it did not take; ``auto`` is the stage's choice.
    """
    bits = choose_bucket_bits(seen_rows, len(cands))
    unseen = 0
    paths = {"scan": 0, "keyset": 0, "bits": bits}
    for _bucket, ordered in bucket_lists(combine_candidates([cands]), bits):
        fps = fingerprints(ordered)
        lo, hi = int(fps[0]), int(fps[-1])
        span = (hi - lo + 1) / (1 << (64 - bits))
        path = choose_path(len(ordered), seen_rows / (1 << bits) * span, store.keyset_cost_ratio)
        path = path if force == "auto" else force
        paths[path] += 1
        if path == "keyset":
            chunks: Iterable[Sequence[bytes]] = [list(store.read_keys("urls", fp_keys(fps), keys_only=True))]
        else:
            end = fp_key(hi + 1) if hi + 1 < (1 << 64) else None
            chunks = key_chunks(k for k, _ in store.read_range("urls", fp_key(lo), end, keys_only=True))
        unseen += int(np.count_nonzero(~seen_mask(fps, chunks)))
    return unseen, paths


def check_point(store: Store, cands: list[Candidate]) -> int:
    """One request per URL: what a per-URL seen check costs."""
    return sum(1 for c in cands if not store.read_keys("urls", [fp_key(c.fp)], keys_only=True))


def check_read_row(store: Store, cands: list[Candidate]) -> int | None:
    """On Bigtable, one ``read_row`` per URL through the data client (what a crawler that
    looks URLs up one at a time sends); None on the embedded store."""
    from beamcrawl.stores.bigtable import BigtableStore

    if not isinstance(store, BigtableStore):
        return None
    from google.cloud.bigtable.data import BigtableDataClient
    from google.cloud.bigtable.data import row_filters as rf

    keys_only = rf.RowFilterChain([rf.CellsRowLimitFilter(1), rf.StripValueTransformerFilter(True)])
    with BigtableDataClient(project=store.project) as client:
        table = client.get_table(store.instance, store.table_id("urls"))
        return sum(1 for c in cands if table.read_row(fp_key(c.fp), row_filter=keys_only) is None)


def select_due(store: Store, due_share: float) -> int:
    """The select stage's scan: every frontier row due by a moment, decoded."""
    now_ms = T0_MS + int(SPREAD_MS * due_share)
    n = 0
    for _key, cells in store.read_range("frontier", b"", frontier_key(now_ms + 1, 0)):
        FrontierEntry.from_cells(cells)
        n += 1
    return n


def child(path: str, n: int, count: int, due_share: float, passes: int = 2, force: str = "auto") -> None:
    """One measurement in a fresh process; prints a JSON line."""
    cands, want_unseen = candidates_for(n, count)
    store: Store = open_store(path) if "://" in path else EmbeddedStore(path)
    try:
        # Twice each, alternating, best of two: the first pass warms the OS page cache for
        # whichever goes second, so a single pass each would favour the second.
        t0 = time.perf_counter()
        seen_rows = store.estimate_rows("urls")
        estimate_s = time.perf_counter() - t0
        batch_s = point_s = read_row_s = float("inf")
        unseen_row = None
        for _ in range(passes):
            t0 = time.perf_counter()
            unseen, paths = check_batch(store, cands, seen_rows, force)
            batch_s = min(batch_s, time.perf_counter() - t0)
            rss_batch = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            t0 = time.perf_counter()
            unseen_point = check_point(store, cands)
            point_s = min(point_s, time.perf_counter() - t0)
            t0 = time.perf_counter()
            unseen_row = check_read_row(store, cands)
            read_row_s = min(read_row_s, time.perf_counter() - t0)
        t0 = time.perf_counter()
        due = select_due(store, due_share)
        select_s = time.perf_counter() - t0
    finally:
        store.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ok = unseen == unseen_point == want_unseen and unseen_row in (None, want_unseen)
    print(json.dumps({
        "n": n, "candidates": count, "unseen": unseen, "ok": ok, "batch_s": batch_s, "point_s": point_s,
        "speedup": point_s / batch_s, "paths": paths,
        "read_row_s": read_row_s if unseen_row is not None else None, "rss_batch_mb": rss_batch, "rss_mb": rss,
        "due_rows": due, "select_s": select_s, "seen_rows_estimate": seen_rows, "estimate_s": estimate_s,
    }))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--store", choices=("embedded", "emulator", "bigtable"), default="embedded",
        help="the embedded store, or the Bigtable emulator (started here; 'bigtable' is the same)",
    )  # fmt: skip
    parser.add_argument("--sizes", default="1000000,10000000", help="known-URL counts, comma-separated")
    parser.add_argument("--candidates", type=int, default=200_000)
    parser.add_argument("--passes", type=int, default=2, help="runs of each check, alternating; the best counts")
    parser.add_argument(
        "--path", choices=("auto", "scan", "keyset"), default="auto",
        help="the batch's read per bucket: choose_path's choice (auto), or forced, to price the other",
    )  # fmt: skip
    parser.add_argument("--due-share", type=float, default=0.01, help="share of frontier rows due at select")
    parser.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the stores (a rerun reuses them)")
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        path, n, count, share, passes, force = args.child
        child(path, int(n), int(count), float(share), int(passes), force)
        return 0
    if args.store != "embedded":
        return main_emulator(args)
    base = Path(args.dir or tempfile.mkdtemp(prefix="drum-scale-"))
    base.mkdir(parents=True, exist_ok=True)
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        path = base / f"store-{n}.sqlite"
        if not path.exists():
            print(f"filling {n:,} known URLs into {path}", flush=True)
            filled = fill(path, n)
            print(
                f"  {filled['fill_s']:.0f} s, {filled['fill_us_per_url']:.1f} µs a URL, {filled['bytes'] / 1e9:.2f} GB",
                flush=True,
            )
        else:
            filled = {"fill_s": float("nan"), "fill_us_per_url": float("nan"), "bytes": path.stat().st_size}
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(path), str(n), str(args.candidates), str(args.due_share),
             str(args.passes), args.path],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        result = {**json.loads(proc.stdout.strip().splitlines()[-1]), **filled}
        print(f"  {json.dumps(result)}", flush=True)
        results.append(result)
        if not args.keep:
            path.unlink()
    if not args.keep and not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    print()
    print(
        "| known URLs | batch s | per-URL s | batch × faster | bucket bits, scan/keyset buckets | peak RSS MB | select: due rows, s | fill µs/URL |"
    )
    print("|---:|---:|---:|---:|---|---:|---:|---:|")
    for r in results:
        p = r["paths"]
        print(
            f"| {r['n']:,} | {r['batch_s']:.2f} | {r['point_s']:.2f} | {r['speedup']:.1f} | {p['bits']}, {p['scan']}/{p['keyset']} "
            f"| {r['rss_mb']:.0f} | {r['due_rows']:,}, {r['select_s']:.2f} | {r['fill_us_per_url']:.1f} |"
        )
    if len(results) > 1:
        print(
            f"\npeak RSS at {results[-1]['n']:,} / at {results[0]['n']:,}: {results[-1]['rss_mb'] / results[0]['rss_mb']:.2f}×"
        )
    return 0 if all(r["ok"] for r in results) else 1


def emulator_memory_mb(pid: int) -> tuple[float, float]:
    """The emulator's resident set now and at its peak (``VmRSS``, ``VmHWM``), in MB."""
    fields: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0)


@contextlib.contextmanager
def emulator_store() -> Iterator[tuple[str, int]]:
    """A fresh emulator (the project's starter) with one scratch store: ``(uri, pid)``."""
    from beamcrawl.stores.emulator import running_emulator, scratch_store

    with running_emulator() as emu, scratch_store() as uri:
        yield uri, emu.pid


def main_emulator(args: argparse.Namespace) -> int:
    """``--store emulator``: each size in a fresh emulator, checked from a child process."""
    results = []
    failed = 0
    for n in (int(s) for s in args.sizes.split(",")):
        with emulator_store() as (uri, pid):
            print(f"filling {n:,} known URLs into the emulator (pid {pid}), {uri}", flush=True)
            filled = fill(uri, n)
            rss_filled, _ = emulator_memory_mb(pid)
            print(f"  {filled['fill_s']:.0f} s, {filled['fill_us_per_url']:.1f} µs a URL, emulator RSS {rss_filled:.0f} MB", flush=True)  # fmt: skip
            # The child inherits BIGTABLE_EMULATOR_HOST from running_emulator.
            proc = subprocess.run(
                [sys.executable, __file__, "--child", uri, str(n), str(args.candidates), str(args.due_share),
                 str(args.passes), args.path],
                capture_output=True, text=True, check=False, env=dict(os.environ),
            )  # fmt: skip
            rss_end, rss_peak = emulator_memory_mb(pid)
        if proc.returncode != 0:
            # Say why (a large store can fail in the child), then go on with the other sizes.
            print(f"  the check at {n:,} failed ({proc.returncode}):\n{proc.stderr.strip()[-3000:]}", flush=True)
            failed += 1
            continue
        result = {
            **json.loads(proc.stdout.strip().splitlines()[-1]), **filled,
            "emulator_rss_filled_mb": rss_filled, "emulator_rss_end_mb": rss_end, "emulator_rss_peak_mb": rss_peak,
        }  # fmt: skip
        print(f"  {json.dumps(result)}", flush=True)
        results.append(result)
    print()
    print(
        "| known URLs | candidates | batch s | per-URL s (the store's read) | batch × faster | per-URL s (read_row) "
        "| batch × faster | bucket bits, scan/keyset buckets "
        "| select: due rows, s | fill s (µs/URL) | emulator RSS MB filled / peak | client peak RSS MB |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for r in results:
        p = r["paths"]
        print(
            f"| {r['n']:,} | {r['candidates']:,} | {r['batch_s']:.2f} | {r['point_s']:.2f} | {r['speedup']:.1f} "
            f"| {r['read_row_s']:.2f} | {r['read_row_s'] / r['batch_s']:.1f} "
            f"| {p['bits']}, {p['scan']}/{p['keyset']} | {r['due_rows']:,}, {r['select_s']:.2f} "
            f"| {r['fill_s']:.0f} ({r['fill_us_per_url']:.0f}) | {r['emulator_rss_filled_mb']:.0f} / "
            f"{r['emulator_rss_peak_mb']:.0f} | {r['rss_mb']:.0f} |"
        )
    return 0 if not failed and all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
