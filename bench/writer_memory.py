"""What the writers of the stage after content seen hold: a WARC file's index entries until
the file closes, and what one Parquet part's flush adds to the process.

- **The index.** ``--entries`` CDXJ entries of simweb-shaped captures (URLs of ~60
  characters, a digest, a mime, a status), held as ``CdxjEntry`` objects and as
  ``cdxj.pack`` tuples: the bytes an entry keeps alive, every string it holds included,
  traced with ``tracemalloc``. A WARC file holds up to ``warc_io.INDEX_ENTRIES`` of them.
  Then the same packed entries added to a ``cdxj.SortedIndex`` (held ``cdxj.RUN_ENTRIES``
  at a time, the rest in sorted runs on disk) and to a list, and each written: the most
  either held in Python's memory while adding and writing, and the CPU of each.
- **A bucket's new URLs' cells.** URL seen's merge makes the frontier and seen-set cells of a
  bucket's ``--bucket`` new URLs from its columns (``schemas/cell_columns.py``): the most
  Python's allocations held (numpy's arrays included) and the CPU, the rows cut in one
  gather and ``CUT_ROWS`` at a time.
- **A flush.** A links/ ``ColumnBuffer`` filled with edge rows shaped like simweb's (13
  links a page) up to ``FLUSH_BYTES`` estimated, as ``_ParquetPartsFn`` fills it, then
  written as the DoFn writes it (``write_table(buffer.take(), ...)``) while this process's
  RSS and Arrow's allocations are sampled every 2 ms: the rise of each over what the buffer
  already held, and the write's CPU.

Both run in the stage that is a round's peak in-process (bench/README.md, "Where a round's
memory goes").

    python bench/writer_memory.py [--entries 20000] [--index 50000] [--bucket 10000] [--repeat 3]
                                  [--out /tmp/part.parquet]

To measure another tree, run this file with that tree first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pyarrow as pa

from beamcrawl.core.archive import cdxj
from beamcrawl.schemas import cell_columns
from beamcrawl.schemas.candidate_block import CandidateBlock
from beamcrawl.schemas.records import Candidate
from beamcrawl.state.frontier import block_priorities
from beamcrawl.transforms import parquet_io

LINKS_A_PAGE = 13


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def filled_buffer(seed: int = 1) -> tuple[parquet_io.ColumnBuffer, int]:
    """A links/ buffer at the flush's bound, sealed as the DoFn seals it; and its rows."""
    rng = random.Random(seed)
    buffer = parquet_io.ColumnBuffer(parquet_io.LINKS_SCHEMA)
    rows = 0
    while buffer.nbytes < parquet_io.FLUSH_BYTES:
        src = f"http://docs.site{rng.randint(0, 2999):04d}.fr:52705/p/{rng.randint(0, 10**6)}.html"
        dst = [f"http://m.site{rng.randint(0, 2999):04d}.net:52705/p/{rng.randint(0, 10**6)}.html" for _ in range(13)]
        n = len(dst)
        buffer.add_columns(
            {
                "src": [src] * n,
                "dst": dst,
                "src_fp": [rng.getrandbits(63) for _ in range(n)],
                "dst_fp": [rng.getrandbits(63) for _ in range(n)],
                "src_host": [src.split("/")[2].split(":")[0]] * n,
                "dst_host": [d.split("/")[2].split(":")[0] for d in dst],
                "src_domain": ["site.fr"] * n,
                "dst_domain": ["site.net"] * n,
                "anchor": [f"anchor text {i}" for i in range(n)],
                "nofollow": [False] * n,
                "kind": ["a"] * n,
                "fetched_at": [1_796_367_375_000] * n,
            }
        )
        rows += n
        if buffer.full():
            buffer.seal()
    buffer.seal()
    return buffer, rows


def flush_once(path: str) -> dict[str, float]:
    """One filled buffer written as a part: RSS and Arrow rises over the filled buffer, MB,
    and the write's CPU seconds."""
    buffer, rows = filled_buffer()
    pool = pa.default_memory_pool()
    held = pool.bytes_allocated()
    rss0 = _rss_mb()
    peak = [rss0, held]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_mb())
            peak[1] = max(peak[1], pool.bytes_allocated())
            time.sleep(0.002)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    cpu = time.process_time()
    parquet_io.write_table(buffer.take(), ("src", "dst"), path)
    cpu = time.process_time() - cpu
    done.set()
    watcher.join()
    return {
        "rows": rows,
        "held_mb": held / 2**20,
        "rss_rise_mb": peak[0] - rss0,
        "arrow_rise_mb": (peak[1] - held) / 2**20,
        "cpu_s": cpu,
    }


def index_bytes(entries: int, seed: int = 1) -> tuple[float, float]:
    """Bytes an index entry keeps alive while its file is open, with every string it holds
    (its capture's URL among them): as a ``CdxjEntry``, and packed (:func:`cdxj.pack`). The
    captures are made under the trace and dropped before each reading."""
    rng = random.Random(seed)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
    filename = "warc/round=3/part-0123456789abcdef.warc.gz"
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        captures = [
            cdxj.Capture(
                url=f"http://docs.site{rng.randint(0, 2999):04d}.fr:52705/p/{rng.randint(0, 10**6)}.html",
                timestamp=f"202612040715{i % 60:02d}",
                mime="".join(["text/", "html"]),  # a string of its own, as a parsed header gives it
                status=str(200 + i % 2),
                digest="sha1:" + "".join(rng.choice(alphabet) for _ in range(32)),
            )
            for i in range(entries)
        ]
        held: list[Any] = [
            cdxj.entry_for_capture(c, 1000 + 2000 * i, 2100 + i % 50, filename) for i, c in enumerate(captures)
        ]
        del captures
        gc.collect()
        as_entries = tracemalloc.get_traced_memory()[0] - start
        held = [cdxj.pack(entry) for entry in held]
        gc.collect()
        as_packed = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert len(held) == entries
    return as_entries / entries, as_packed / entries


def index_runs(entries: int, folder: str = "/tmp", seed: int = 2) -> list[dict[str, Any]]:
    """A file's index entries packed one by one (as the WARC writer packs each record's)
    and held in a list until written whole (as the writer did before ``SortedIndex``), held
    in a list and written by ``write_packed``, and added to a :class:`cdxj.SortedIndex` and
    written: for each, the most Python's allocations held while packing, adding and
    writing, and the CPU of it (the entries themselves made beforehand, outside both)."""
    rng = random.Random(seed)
    filename = "warc/round=3/part-0123456789abcdef.warc.gz"
    made = [
        cdxj.entry_for_capture(
            cdxj.Capture(
                url=f"http://docs.site{rng.randint(0, 2999):04d}.fr:52705/p/{rng.randint(0, 10**6)}.html",
                timestamp=f"202612040715{i % 60:02d}",
                mime="text/html",
                status="200",
                digest="".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(32)),
            ),
            1000 + 2000 * i,
            2100 + i % 50,
            filename,
        )
        for i in range(entries)
    ]
    out = []
    for how in ("list, joined", "list", "runs"):
        figures: dict[str, Any] = {"how": how}
        for traced in (False, True):  # CPU untraced (tracemalloc slows every allocation), then memory
            gc.collect()
            if traced:
                tracemalloc.start()
            cpu = time.process_time()
            try:
                lines = _index_once(how, made, folder)
                cpu = time.process_time() - cpu
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert lines == entries
            if traced:
                figures["peak_mb"] = peak / 2**20
            else:
                figures["cpu_us"] = cpu / entries * 1e6
        out.append(figures)
    written = {name: Path(folder, f"beamcrawl-index-{name}.cdxj").read_bytes() for name in ("joined", "list", "runs")}
    assert written["joined"] == written["list"] == written["runs"], "the indexes differ"
    return out


def _index_once(how: str, made: list[cdxj.CdxjEntry], folder: str) -> int:
    """One file's index packed, held and written ``how``; returns its lines."""
    if how == "runs":
        index = cdxj.SortedIndex()
        for entry in made:
            index.add(cdxj.pack(entry))
        return index.write(os.path.join(folder, "beamcrawl-index-runs.cdxj"))
    held: list[Any] = []
    for entry in made:
        held.append(cdxj.pack(entry))
    if how == "list":
        return cdxj.write_packed(os.path.join(folder, "beamcrawl-index-list.cdxj"), held)
    # As the WARC writer wrote it before SortedIndex: the file joined whole.
    held.sort()
    text = b"".join(b"%s %s %s\n" % (key, stamp, fields) for key, stamp, _, fields in held)
    with open(os.path.join(folder, "beamcrawl-index-joined.cdxj"), "wb") as fh:
        fh.write(text)
    return len(held)


def bucket_cells(rows: int, seed: int = 3) -> list[dict[str, Any]]:
    """A bucket of ``rows`` new URLs (simweb-shaped: ~70-character URLs, 300 hosts) made
    into their frontier and seen-set cells as URL seen's merge makes them, cut in one
    gather and ``CUT_ROWS`` rows at a time: for each, the most Python's allocations held
    (traced) and the CPU (best of three, untraced). The cells are checked equal."""
    rng = random.Random(seed)
    block = CandidateBlock.from_candidates(
        sorted(
            (
                Candidate(
                    fp=rng.getrandbits(64),
                    url=f"http://docs.site{h:04d}.fr:52705/p/{rng.randint(0, 10**6)}/{rng.randint(0, 10**4)}.html",
                    host=f"docs.site{h:04d}.fr",
                    depth=rng.randint(1, 6),
                    priority=0.5,
                    source="link",
                    inlinks=1,
                    inlink_hosts=(rng.getrandbits(32),),
                )
                for h in (rng.randint(0, 299) for _ in range(rows))
            ),
            key=lambda c: c.fp,
        )
    )
    priority = block_priorities(block)
    now_ms = 1_780_000_000_000

    def cells() -> tuple[list[bytes] | None, list[bytes] | None]:
        return cell_columns.frontier_cells(block, now_ms, priority, ""), cell_columns.queued_cells(block, now_ms)

    out, made = [], []
    default = cell_columns.CUT_ROWS
    try:
        for how, cut in (("one gather", max(rows, 1)), (f"{default:,} rows a gather", default)):
            cell_columns.CUT_ROWS = cut
            best = float("inf")
            for _ in range(3):
                gc.collect()
                cpu = time.process_time()
                result = cells()
                best = min(best, time.process_time() - cpu)
            made.append(result)
            del result
            gc.collect()
            tracemalloc.start()
            try:
                cells()
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            out.append({"how": how, "peak_mb": peak / 2**20, "cpu_us": best / rows * 1e6})
    finally:
        cell_columns.CUT_ROWS = default
    assert made[0] == made[1] and made[0][0] is not None, "the cells differ"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="flushes, each in this process after the last")
    parser.add_argument("--out", default="/tmp/beamcrawl-parquet-flush.parquet")
    parser.add_argument("--entries", type=int, default=20_000, help="index entries to weigh")
    parser.add_argument("--index", type=int, default=50_000, help="entries of the index held and written")
    parser.add_argument("--bucket", type=int, default=10_000, help="new URLs of the bucket whose cells are made")
    args = parser.parse_args()
    entry, packed = index_bytes(args.entries)
    print(f"index entries ({args.entries:,}): {entry:.0f} B an entry as CdxjEntry, {packed:.0f} B packed\n")
    print(
        f"| a file's index of {args.index:,} packed entries | most held while adding and writing MB | CPU µs an entry |"
    )
    print("|---|---:|---:|")
    for _ in range(args.repeat):
        for row in index_runs(args.index):
            print(f"| {row['how']} | {row['peak_mb']:.1f} | {row['cpu_us']:.2f} |")
    print()
    print(f"| a bucket's {args.bucket:,} new URLs' cells | most held MB | CPU µs a URL |")
    print("|---|---:|---:|")
    for row in bucket_cells(args.bucket):
        print(f"| {row['how']} | {row['peak_mb']:.1f} | {row['cpu_us']:.2f} |")
    print()
    print(f"Arrow's pool: {pa.default_memory_pool().backend_name}")
    print("| flush | rows | Arrow held before MB | RSS rise MB | Arrow rise MB | CPU s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in range(1, args.repeat + 1):
        f = flush_once(args.out)
        print(
            f"| {n} | {f['rows']:,} | {f['held_mb']:.1f} | {f['rss_rise_mb']:.0f} | {f['arrow_rise_mb']:.0f}"
            f" | {f['cpu_s']:.3f} |"
        )


if __name__ == "__main__":
    main()
