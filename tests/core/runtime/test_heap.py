"""heap.release gives the pages a process freed back to the system (glibc's malloc_trim)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from beamcrawl.core.runtime import heap

pytestmark = pytest.mark.skipif(not heap.supported(), reason="the C library has no malloc_trim (not glibc)")

# A child process (its heap is its own): 300 MB in 2 KB objects, which glibc's malloc serves
# from its heap, then all but every hundredth freed: the ones left alive pin the heap's top, so
# nothing goes back by itself. RSS before and after the release, in MB.
_CHILD = textwrap.dedent(
    """
    import sys
    from beamcrawl.core.runtime import heap

    def rss():
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * 4096 // 2**20

    blocks = [bytes(2048 - 33) + bytes([i % 256]) for i in range(150_000)]
    kept = blocks[::100]
    del blocks
    before = rss()
    released = heap.release()
    print(before, rss(), released, len(kept))
    """
)


def test_release_gives_back_what_was_freed_and_keeps_what_is_alive() -> None:
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120, check=True)
    before, after, released, kept = out.stdout.split()
    assert released == "True" and int(kept) == 1_500
    # ~290 of the ~300 MB were freed but still resident; the release gives most of it back.
    assert int(before) - int(after) > 200, out.stdout
