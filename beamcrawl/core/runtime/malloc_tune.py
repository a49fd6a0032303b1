"""glibc malloc settings for a process that frees large buffers all round long.

A round allocates and frees buffers of hundreds of KB to a few MB all the time: batch files
pickled and read back, the runner's encoded element buffers, Parquet and zlib buffers,
responses. glibc serves a block above its mmap threshold (128 KiB at start) with its own
mapping and unmaps it when freed, but it *raises* that threshold to the size of every such
block freed (up to 32 MiB), so after the first large buffer is freed the later ones come
from the heap. There, freed memory is kept for reuse, and a heap whose live blocks sit among
the free ones can give little of it back: measured in an in-process round
(``bench/memory_timeline.py --hosts 3000 --window 60``), 191-250 MB of "free kept" memory
in every stage after the fetch, a quarter of the round's peak RSS. Each thread that
allocates also gets an arena of its own (up to eight per core), which keeps its own free
memory apart: the fetch loop's thread is one.

:func:`tune` fixes both thresholds (setting them turns the raise off) and caps the arenas
at :data:`ARENA_MAX`. The same round's free-kept memory stayed at 15-46 MB and its peak fell
from 904 to 708 MB, with no CPU a page that the runs could tell apart (the cost is a mapping
and an unmapping per block above 128 KiB, a few a page at most). Idempotent per process;
a no-op where the C library is not glibc (its settings name glibc's allocator only).
Called where the per-page stages set up, as :mod:`gctune` is, and where a round is launched
(the in-process runner's own buffers).
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = ["ARENA_MAX", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune"]

#: Blocks this large or larger get a mapping of their own, unmapped when freed (glibc's start value).
MMAP_THRESHOLD = 1024 * 1024
#: Free memory at the top of the heap beyond this is given back to the system.
TRIM_THRESHOLD = 64 * 1024 * 1024
#: Malloc arenas in all (the main one and one more, whatever the threads).
ARENA_MAX = 2

# mallopt's parameter numbers, from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

_tuned_pid: int | None = None
_applied: dict[str, bool] = {}


def tune() -> dict[str, bool]:
    """Sets this process's malloc thresholds and arena cap, once; returns which settings
    glibc took (empty where the C library is not glibc)."""
    global _tuned_pid, _applied
    if _tuned_pid == os.getpid():
        return dict(_applied)
    _tuned_pid = os.getpid()
    _applied = {}
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return {}
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return {}
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    for name, param, value in (
        ("mmap_threshold", _M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        ("trim_threshold", _M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        ("arena_max", _M_ARENA_MAX, ARENA_MAX),
    ):
        _applied[name] = mallopt(param, value) == 1  # mallopt returns 1 on success
    return dict(_applied)
