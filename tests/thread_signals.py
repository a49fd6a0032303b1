"""Signals aimed at one thread of a process, as the kernel may deliver a process's signal.

The kernel hands a signal sent to a process (``kill``, a terminal's Ctrl-C) to any of its
threads that does not block it; CPython acts on it on the main thread only. Tests that a
stop signal is acted on promptly aim it at each thread in turn with these.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

_LIBC = ctypes.CDLL(None, use_errno=True)


def tgkill(pid: int, tid: int, sig: int) -> None:
    """Sends ``sig`` to one thread of ``pid`` (os.kill lets the kernel choose)."""
    if _LIBC.tgkill(pid, tid, int(sig)) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill({pid}, {tid}, {sig})")


def threads_taking(pid: int, sig: int) -> list[int]:
    """The threads of ``pid`` that do not block ``sig``, the main thread (tid == pid) first."""
    taking = []
    for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
        try:
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except (FileNotFoundError, ProcessLookupError):  # the thread ended meanwhile (either error)
            continue
        blocked = int(status.split("SigBlk:")[1].split()[0], 16)
        if not blocked >> (int(sig) - 1) & 1:
            taking.append(tid)
    return sorted(taking, key=lambda tid: tid != pid)


def settled_threads_taking(pid: int, sig: int, at_least: int = 2, timeout: float = 10.0) -> list[int]:
    """:func:`threads_taking`, read again until the main thread and ``at_least`` threads in
    all take ``sig`` (or ``timeout`` passes: the last reading, for the caller to assert on).

    One reading is not enough: glibc blocks every signal in a thread while that thread
    starts another (``pthread_create``), so a process still starting its threads can show
    its main thread blocking ``sig`` for a moment (one CI run read ``[other]`` so).
    """
    deadline = time.monotonic() + timeout
    while True:
        targets = threads_taking(pid, sig)
        if (targets and targets[0] == pid and len(targets) >= at_least) or time.monotonic() >= deadline:
            return targets
        time.sleep(0.01)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def stop_signals_as_from_a_terminal() -> None:
    """A ``preexec_fn``: the child starts with SIGINT and SIGTERM at their default action and
    unblocked, as a command typed at a terminal does, whatever the test process inherited
    (a suite started in the background has SIGINT ignored, and an ignored or blocked signal
    stays so across exec; one CI run had its SIGINT tests fail so in one worker)."""
    import signal

    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
