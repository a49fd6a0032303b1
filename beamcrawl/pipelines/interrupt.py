"""Ctrl-C during a round: noted, so a runner's re-raised KeyboardInterrupt is told apart
from a failure."""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass
from typing import Any, Iterator


@dataclass
class Interrupt:
    hit: bool = False


def is_hangup(exc_type: type[BaseException] | None) -> bool:
    """Whether an exception is a gRPC stream ending (a portable runner's workers, on Flink or
    Prism, losing the job service the interrupt stopped)."""
    return exc_type is not None and (exc_type.__module__ or "").split(".")[0] == "grpc"


def _quiet_hangups() -> None:
    """From a Ctrl-C on, a worker thread that dies of its gRPC stream ending prints nothing
    (Python prints each such thread's traceback, 20 lines apiece); any other failure of a
    thread is shown as before."""
    previous = threading.excepthook
    if getattr(previous, "beamcrawl_quiet", False):
        return

    def hook(args: Any) -> None:
        if not is_hangup(args.exc_type):
            previous(args)

    hook.beamcrawl_quiet = True  # type: ignore[attr-defined]
    threading.excepthook = hook


@contextlib.contextmanager
def watch_interrupt() -> Iterator[Interrupt]:
    """Notes a Ctrl-C (SIGINT) while the block runs, then interrupts as usual; the runner
    may re-raise the KeyboardInterrupt as an error of its own, which this tells apart.
    From the Ctrl-C on, logging is off and worker threads dying of a gRPC hangup are quiet."""
    import signal

    seen = Interrupt()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def note(signum: int, frame: Any) -> None:
        seen.hit = True
        # The runner logs the interrupt as an error of each step it unwinds: not news.
        logging.disable(logging.CRITICAL)
        _quiet_hangups()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield seen
    finally:
        # After a hit, logging stays off: the runner's threads go on unwinding (and logging
        # each hangup) until the process ends, which it does next (cli/main.py); a caller that
        # goes on instead turns it back on with logging.disable(logging.NOTSET).
        signal.signal(signal.SIGINT, previous)
