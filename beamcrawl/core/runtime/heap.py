"""Giving back to the system the memory a round freed (pure; no Beam).

A round allocates hundreds of megabytes of small and mid-sized objects and frees nearly all
of them when it ends. glibc's allocator keeps what was freed inside its heap for the next
allocations: only a free stretch at the very top of the heap goes back by itself, so one
object left alive above the rest keeps the whole heap's pages resident. Between rounds the
crawl then sits on its last round's high-water mark while it waits for the next round and
while the charts are drawn beside it (``pipelines/round_charts.py``), a process of its own
whose memory adds to the crawl's. :func:`release` asks the allocator to return every free
page (``malloc_trim``), once a round: it costs tens of milliseconds on a heap of a few hundred
megabytes (measured: 61 MB given back after a round of 73,252 pages; bench/README.md,
"Result at 768c872"). Called while the fetch loop runs it would compete with the loop's
thread for the allocator, which made rounds slower when it was tried ("``malloc_trim``
tried"); so within a round it is called once more, where a fetch bundle's loop has ended
(transforms/fetch.py): what the loop freed (responses, decoded plans, parsers) goes back
before the stages after the fetch grow on top of it (bench/README.md, "One trim when the
fetch's loop ends").

Where the C library is not glibc (macOS, musl) there is no such call and nothing is done.

Arrow's buffers (the round's Parquet parts) come from the same allocator
(:func:`arrow_on_the_system_allocator`): pyarrow's default pool is its bundled mimalloc,
which keeps what Arrow frees for Arrow, beside what glibc keeps for everything else, so the
stage that writes the parts grew by both (bench/README.md, "Arrow's buffers from the
system's allocator").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any

__all__ = ["arrow_on_the_system_allocator", "release", "supported"]

# The environment variable by which a user picks Arrow's pool (pyarrow reads it itself).
ARROW_POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def _trim_function() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None)
    except OSError:
        return None


_malloc_trim = _trim_function()


def supported() -> bool:
    """Whether this process's C library can give free memory back (glibc's ``malloc_trim``)."""
    return _malloc_trim is not None


def release() -> bool:
    """Returns the free pages of the C library's heap to the system; True if any went back."""
    if _malloc_trim is None:
        return False
    return bool(_malloc_trim(0))


def arrow_on_the_system_allocator() -> None:
    """Makes Arrow allocate from the C library's ``malloc`` (its ``system`` pool), so that
    memory Arrow frees is reused by everything else in the process and the other way round,
    unless the user chose a pool with ``ARROW_DEFAULT_MEMORY_POOL``. Buffers made before
    go back to the pool they came from."""
    if os.environ.get(ARROW_POOL_VARIABLE):
        return
    import pyarrow as pa  # only the stages that write Arrow call this

    if pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())
