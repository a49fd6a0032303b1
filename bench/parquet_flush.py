"""What one Parquet part's flush adds to a process's memory, and its CPU.

Fills a links/ ``ColumnBuffer`` with edge rows shaped like simweb's (13 links a page, URLs of
~60 characters) up to ``FLUSH_BYTES`` estimated, as ``_ParquetPartsFn`` does before it writes
a part, then writes it as the DoFn does (``write_table(buffer.take(), ...)``), sampling this
process's RSS and Arrow's allocations every 2 ms meanwhile. Prints the rise of each over
what the buffer already held. The flush runs in the stage that is a round's peak in-process
(bench/README.md, "Where a round's memory goes").

    python bench/parquet_flush.py [--repeat 3] [--out /tmp/part.parquet]

To measure another tree, run this file with that tree first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import random
import threading
import time

import pyarrow as pa

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="flushes, each in this process after the last")
    parser.add_argument("--out", default="/tmp/beamcrawl-parquet-flush.parquet")
    args = parser.parse_args()
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
