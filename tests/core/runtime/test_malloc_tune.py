"""The malloc settings: freed large buffers go back to the system, and threads share two arenas.

Each case runs in a fresh interpreter (the settings are per process and cannot be undone),
once as it starts and once after :func:`malloc_tune.tune`, and reads glibc's own accounts:
``mallinfo2`` for the free memory the heap keeps, ``malloc_stats`` for the arenas.
"""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from beamcrawl.core.runtime import malloc_tune

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's allocator only"
)

_PRELUDE = """
import ctypes, sys, threading
from beamcrawl.core.runtime import malloc_tune
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
if sys.argv[1] == "tuned":
    applied = malloc_tune.tune()
    assert applied and all(applied.values()), applied
"""

_INFO = """
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
"""

# A large buffer freed (glibc then raises its mmap threshold), then a round's worth of
# 2 MiB buffers of which every other one is freed while its neighbours live.
_FREE_KEPT = """
big = libc.malloc(16 << 20); ctypes.memset(big, 1, 16 << 20); libc.free(big)
blocks = [libc.malloc(BLOCK) for _ in range(32)]
for b in blocks:
    ctypes.memset(b, 1, BLOCK)
for b in blocks[::2]:
    libc.free(b)
print(libc.mallinfo2().fordblks)
"""

# A deflate state (the WARC writer makes one per record): from the heap, not a mapping of
# its own; a mapping and unmapping per record cost 113 µs a simweb record (63 → 176 µs,
# bench/per_page_costs.py --steps gzip) at a 128 KiB threshold.
_DEFLATE = """
import zlib, zlib_ng.zlib_ng as zlib_ng
for module in (zlib, zlib_ng, zlib, zlib_ng):
    before = libc.mallinfo2().hblks
    state = module.compressobj(9, module.DEFLATED, -15, 9)
    state.compress(b"x" * 100_000)
    print(libc.mallinfo2().hblks - before)
    del state
"""

# Eight threads allocate at the same time (each new thread would get an arena of its own).
_ARENAS = """
barrier = threading.Barrier(8)
def work():
    barrier.wait()
    held = [libc.malloc(4096) for _ in range(100)]
    barrier.wait()
    for p in held:
        libc.free(p)
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc.malloc_stats()
"""


def _run(body: str, mode: str) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(_PRELUDE) + textwrap.dedent(_INFO) + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", script, mode], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done


def test_freed_large_buffers_are_given_back_not_kept_in_the_heap():
    block = 2 * malloc_tune.MMAP_THRESHOLD
    body = f"BLOCK = {block}\n" + textwrap.dedent(_FREE_KEPT)
    kept_before = int(_run(body, "as-started").stdout)
    kept_after = int(_run(body, "tuned").stdout)
    freed = 16 * block
    assert kept_before >= freed  # glibc's raised threshold: the freed half stays in the heap
    assert kept_after < freed // 8  # each block had its own mapping, unmapped when freed


def test_threads_share_at_most_arena_max_arenas():
    def arenas(mode: str) -> int:
        return sum(line.startswith("Arena ") for line in _run(_ARENAS, mode).stderr.splitlines())

    assert arenas("as-started") > malloc_tune.ARENA_MAX  # a thread gets an arena of its own
    assert arenas("tuned") <= malloc_tune.ARENA_MAX


def test_tune_is_once_per_process_and_says_what_glibc_took():
    done = _run(
        """
        first = malloc_tune.tune()
        again = malloc_tune.tune()
        print(sorted(first.items()) == sorted(again.items()), sorted(first))
        """,
        "tuned",
    )
    assert done.stdout.split(None, 1) == ["True", "['arena_max', 'mmap_threshold', 'trim_threshold']\n"]


def test_a_deflate_state_comes_from_the_heap():
    assert _run(_DEFLATE, "tuned").stdout.split() == ["0"] * 4
