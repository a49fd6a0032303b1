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


@contextlib.contextmanager
def watch_interrupt() -> Iterator[Interrupt]:
    """Notes a Ctrl-C (SIGINT) while the block runs, then interrupts as usual; the runner
    may re-raise the KeyboardInterrupt as an error of its own, which this tells apart."""
    import signal

    seen = Interrupt()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def note(signum: int, frame: Any) -> None:
        seen.hit = True
        # The runner logs the interrupt as an error of each step it unwinds: not news.
        logging.disable(logging.CRITICAL)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)
        if seen.hit:
            logging.disable(logging.NOTSET)


