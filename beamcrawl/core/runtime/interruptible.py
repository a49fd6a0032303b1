"""Waits on the main thread that Ctrl-C and SIGTERM end promptly: external tools, and sleeps.

CPython runs a signal's Python handler on the main thread only, but the kernel hands a
signal sent to the process to *any* of its threads that does not block it: numpy's BLAS
threads, gRPC's, or the crawl's own. When it lands on another thread while the main thread
sits in one long system call (``poll`` inside ``subprocess.run`` waiting for a silent
``go install``, a 60 s ``time.sleep``), the handler (the ``KeyboardInterrupt``) waits until
that call returns: minutes, for a build. Both waits here return to the interpreter every
:data:`WAKE_EVERY` seconds, so a signal delivered to any thread is acted on within that.

:func:`run_tool` also makes sure an interrupted tool leaves nothing running: it gets a
session of its own (its process group is its pid) and the whole group is killed, so a
build's compilers stop with it. A signal that arrives while the tool is being started is
held until its handle exists, then handled (no tool is ever started and lost).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from typing import Any, Iterator, Mapping, Sequence

__all__ = ["WAKE_EVERY", "run_tool", "sleep", "sigterm_as_interrupt"]

# How long a signal delivered to another thread can wait for the main thread to act on it.
WAKE_EVERY = 0.2

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def sleep(seconds: float) -> None:
    """``time.sleep`` in slices of :data:`WAKE_EVERY`: a Ctrl-C delivered to any thread
    raises here within that, not at the end of the whole sleep."""
    end = time.monotonic() + max(seconds, 0.0)
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(left, WAKE_EVERY))


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt in the block (as Ctrl-C does), so its cleanup runs;
    outside the main thread signals stay as they are."""
    if not _on_main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive in the block are noted, then delivered again to this
    thread once it ends (so their own handlers run then, outside the block)."""
    if not _on_main_thread():
        yield
        return
    held: list[int] = []
    previous = {stop: signal.signal(stop, lambda signum, frame: held.append(signum)) for stop in _STOP_SIGNALS}
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """The tool and everything it started, killed and the tool reaped; its pipes closed."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the group is its pid
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def run_tool(
    cmd: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs ``cmd`` to its end with its output captured as text, as
    ``subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)`` does, except
    that a Ctrl-C (or a SIGTERM, raised as KeyboardInterrupt) delivered to any thread ends
    the wait within :data:`WAKE_EVERY`, and any way out but the tool's own end (interrupt,
    timeout, error) kills the tool's whole process group first.

    Raises:
        subprocess.TimeoutExpired: the tool ran past ``timeout`` seconds (and was killed).
        KeyboardInterrupt: Ctrl-C or SIGTERM while it ran (and it was killed).
    """
    deadline = time.monotonic() + timeout
    proc: subprocess.Popen[str] | None = None
    with sigterm_as_interrupt():
        try:
            with _signals_held():  # a signal now is handled once ``proc`` is set
                proc = subprocess.Popen(
                    list(cmd),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=None if env is None else dict(env),
                    start_new_session=True,
                )
            while True:
                try:
                    stdout, stderr = proc.communicate(timeout=min(WAKE_EVERY, max(deadline - time.monotonic(), 0)))
                    return subprocess.CompletedProcess(list(cmd), proc.returncode, stdout, stderr)
                except subprocess.TimeoutExpired:  # retrying loses no output
                    if time.monotonic() >= deadline:
                        raise subprocess.TimeoutExpired(list(cmd), timeout) from None
        except BaseException:
            if proc is not None:
                _kill_group(proc)
            raise
