"""Crash points: named places where a test can make the crawler die as a crash would.

``BEAMCRAWL_CRASH_AT=NAME`` (or ``NAME@N`` for the N-th time the point is reached in this
process) makes :func:`crash_point` kill its own process with SIGKILL at that point: no
``finally`` blocks, no lease release, no flushing — what a power cut or an OOM kill leaves.
Unset (always, outside tests), a crash point costs one environment lookup.

Points in use (tests/pipelines/test_crash_safety.py kills a crawl at each):

    url_seen.after_frontier_write   new URLs queued, not yet marked seen
    commit.before                   round job finished, nothing committed
    commit.after_files              files moved into place, next visits not queued
    commit.after_requeue            next visits queued, finished frontier rows not deleted
    commit.after_frontier_deletes   frontier rows deleted, round counter not advanced
"""

from __future__ import annotations

import os
import signal
import sys
import threading

ENV = "BEAMCRAWL_CRASH_AT"

_lock = threading.Lock()
_hits: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Dies here (SIGKILL) if ``BEAMCRAWL_CRASH_AT`` names this point and hit count."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    wanted, _, nth = spec.partition("@")
    if wanted != name:
        return
    with _lock:
        _hits[name] = count = _hits.get(name, 0) + 1
    if count == (int(nth) if nth else 1):
        print(f"beamcrawl: crash point {name} (hit {count}): killing pid {os.getpid()}", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
