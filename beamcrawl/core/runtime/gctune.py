"""Garbage-collector settings for a worker process that moves many small objects.

A round's workers allocate a few hundred objects per page (fetch results, links, rows,
records) and keep large live heaps (buffered elements, writers, caches). With CPython's
default thresholds (a collection every 700 net allocations, a full one every 100 of those)
the collector walks those heaps over and over: measured on simweb pages, pickling a parsed
page took 105 µs with the defaults and 29 µs without collections. Almost everything a round
allocates is freed by reference counting; the cycle collector is only needed for the rare
cycle, so it can run far less often.

:func:`tune` (idempotent, per process) freezes what exists at the time (modules, pipeline
objects: never garbage, no need to walk them again) and raises the first-generation
threshold. Called from the set-up of the DoFns that do the per-page work, so it applies in
the in-process runner and in every multi-processing or remote worker alike.
"""

from __future__ import annotations

import gc
import os

__all__ = ["GEN0_THRESHOLD", "tune"]

#: Net allocations between young collections (CPython's default: 700).
GEN0_THRESHOLD = 50_000

_tuned_pid: int | None = None


def tune() -> None:
    """Raises this process's collection thresholds and freezes the objects alive now."""
    global _tuned_pid
    if _tuned_pid == os.getpid():
        return
    _tuned_pid = os.getpid()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(GEN0_THRESHOLD, gc.get_threshold()[0]), gen1, gen2)
    gc.freeze()
