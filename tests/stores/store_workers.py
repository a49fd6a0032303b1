"""Functions run in child processes by the store tests.

They live in their own small module (not a test module) so a spawned child imports
little before it starts writing, which keeps the processes' writes overlapping.
"""

from __future__ import annotations

import struct
from typing import Any

from beamcrawl.stores.base import Mutation, Store


def worker_key(worker: int, i: int) -> bytes:
    """The row key worker ``worker`` writes for its ``i``-th row."""
    return struct.pack(">IQ", worker, i)


def write_rows(store: Store, worker: int, rows: int, batch: int, barrier: Any, results: Any) -> None:
    """Writes ``rows`` rows in small batches, then races for the lease in ``meta``.

    Args:
        store: The store, pickled into this process.
        worker: This worker's number.
        rows: How many rows to write.
        batch: Rows per ``mutate`` call; small, so the processes' writes interleave.
        barrier: A ``multiprocessing.Barrier`` so all workers start writing together.
        results: A queue that receives ``(worker, won_the_lease)``.
    """
    # Open (lazily, on first use) before the barrier so opening is not what is timed.
    store.read_keys("meta", [b"lease"])
    barrier.wait()
    for start in range(0, rows, batch):
        store.mutate(
            "urls",
            [
                Mutation.set(worker_key(worker, i), {"u:w": str(worker).encode(), "u:i": b"%d" % i})
                for i in range(start, min(start + batch, rows))
            ],
        )
    won = store.check_and_set("meta", b"lease", "m:owner", None, str(worker).encode())
    store.close()
    results.put((worker, won))
