"""What the writers of the stage after content seen hold: a WARC file's index entries until
the file closes, and what one Parquet part's flush adds to the process.

- **The index.** ``--entries`` CDXJ entries of simweb-shaped captures (URLs of ~60
  characters, a digest, a mime, a status), held as ``CdxjEntry`` objects and as
  ``cdxj.pack`` tuples: the bytes an entry keeps alive, every string it holds included,
  traced with ``tracemalloc``. A WARC file holds up to ``warc_io.INDEX_ENTRIES`` of them.
- **A flush.** A links/ ``ColumnBuffer`` filled with edge rows shaped like simweb's (13
  links a page) up to ``FLUSH_BYTES`` estimated, as ``_ParquetPartsFn`` fills it, then
  written as the DoFn writes it (``write_table(buffer.take(), ...)``) while this process's
  RSS and Arrow's allocations are sampled every 2 ms: the rise of each over what the buffer
  already held, and the write's CPU.

Both run in the stage that is a round's peak in-process (bench/README.md, "Where a round's
memory goes").

    python bench/writer_memory.py [--entries 20000] [--repeat 3] [--out /tmp/part.parquet]

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
from typing import Any

import pyarrow as pa

from beamcrawl.core.archive import cdxj
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="flushes, each in this process after the last")
    parser.add_argument("--out", default="/tmp/beamcrawl-parquet-flush.parquet")
    parser.add_argument("--entries", type=int, default=20_000, help="index entries to weigh")
    args = parser.parse_args()
    entry, packed = index_bytes(args.entries)
    print(f"index entries ({args.entries:,}): {entry:.0f} B an entry as CdxjEntry, {packed:.0f} B packed\n")
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
