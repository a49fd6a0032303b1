"""Servers the crawl starts for itself end when the crawl ends, however it ends.

A server a crawl launches for its own use (the Flink job server with its mini-cluster, a
Bigtable emulator) is stopped by the launcher's ``finally`` on a normal exit, a Ctrl-C or
a SIGTERM. A SIGKILL or an OOM kill runs no ``finally``: the server is reparented to init
and runs on, holding its memory (a job server's JVM: half a gigabyte) and its ports, until
someone finds it. :func:`die_with_parent`, run in the child between fork and exec, asks
the kernel to send it SIGTERM when the process that started it ends (Linux's
``PR_SET_PDEATHSIG``), so it stops as it would have been stopped.

The signal comes when the *thread* that forked the child ends, not the whole process:
start such servers from a thread that lives as long as they should (the CLI's main thread).
Elsewhere than Linux it does nothing.
"""

from __future__ import annotations

import ctypes
import signal
import sys
from typing import Callable

__all__ = ["die_with_parent", "parent_death_hook"]

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:  # runs in the child between fork and exec
    """Makes this process get SIGTERM when its parent ends (Linux; nothing elsewhere)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def parent_death_hook() -> Callable[[], None] | None:
    """The ``preexec_fn`` for ``subprocess.Popen`` of a server that must end with the
    crawl: :func:`die_with_parent` on Linux, None elsewhere."""
    return die_with_parent if sys.platform.startswith("linux") else None
