"""A crawl's own log: ``OUT/logs/crawl-<time>.log``, what the console showed, in plain form.

Each run of ``beamcrawl crawl`` on a local output folder writes one log file, line by line
as it goes (so ``tail -f`` follows a crawl started in the background or by a scheduler): the
lines printed on stdout (seeds, each round's start and summary, waits), the log records
(INFO and above, as on the console) and the live progress as plain lines (one every
``BEAMCRAWL_PROGRESS_EVERY`` seconds, 10 by default, and the round's last one), whatever the
console shows (a bar on a terminal). The run's error or interruption is its last line.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, TextIO

from beamcrawl.core.runtime import files
from beamcrawl.pipelines.progress import format_line

__all__ = ["CrawlLog", "Tee", "stamped"]

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
PLAIN_EVERY = 10.0


def stamped(title: str, text: str) -> str:
    """A heading with the local time, then ``text``, as the log keeps a failed round's
    traceback (the console shows one line: pipelines/launch.py)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    return f"{stamp} {title}\n{text.rstrip()}\n"


class Tee:
    """A text stream writing to the console's stream and to the log."""

    def __init__(self, console: TextIO, log: "CrawlLog") -> None:
        self.console = console
        self.log = log

    def write(self, text: str) -> int:
        self.log.write(text)
        return self.console.write(text)

    def flush(self) -> None:
        self.console.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console, name)


class CrawlLog:
    """The log file of one run (a no-op for an output folder on an object store, where a
    file cannot be appended to and followed)."""

    def __init__(self, out: str, now: float | None = None) -> None:
        self.path: str | None = None
        self.fh: TextIO | None = None
        self.handler: logging.Handler | None = None
        self.next_line = 0.0
        self._lock = threading.RLock()
        if files.is_remote(out):
            return
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now or time.time()))
        folder = os.path.join(out, "logs")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"crawl-{stamp}.log")
        n = 1
        while os.path.exists(path):  # two runs in one second
            n += 1
            path = os.path.join(folder, f"crawl-{stamp}-{n}.log")
        self.path = path
        self.fh = open(path, "a", encoding="utf-8", buffering=1)  # line-buffered: tail -f sees each line

    def __enter__(self) -> "CrawlLog":
        if self.fh is not None:
            self.handler = logging.StreamHandler(self.fh)
            self.handler.lock = self._lock  # one lock for its records and write()'s lines
            self.handler.setLevel(logging.INFO)
            self.handler.setFormatter(logging.Formatter(FORMAT))
            logging.getLogger().addHandler(self.handler)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is not None:  # the run's last word, as the console shows it
            said = "interrupted" if isinstance(exc, KeyboardInterrupt) else (str(exc) or type(exc).__name__)
            self.write(f"beamcrawl crawl: {'' if said.startswith('interrupted') else 'error: '}{said}\n")
        if self.handler is not None:
            logging.getLogger().removeHandler(self.handler)
        with self._lock:
            if self.fh is not None:
                self.fh.close()
                self.fh = None

    def write(self, text: str) -> None:
        # Under the lock the log handler writes under: the runner's threads write here too
        # (pipelines/runner_output.py), and may still while the log closes.
        with self._lock:
            if self.fh is not None and text:
                self.fh.write(text)

    def note(self, title: str, text: str) -> None:
        """Writes a stamped heading and ``text`` (a failed round's traceback)."""
        self.write(stamped(title, text))

    def tee(self, console: TextIO) -> TextIO:
        """``console``, with everything written to it also written here."""
        return Tee(console, self) if self.fh is not None else console  # type: ignore[return-value]

    def progress(self, round_no: int, fields: dict[str, Any], now: float, final: bool) -> None:
        """A live-progress sink (pipelines/live.py): a plain line every interval, and the last."""
        if self.fh is None:
            return
        if self.next_line == 0.0:
            self.next_line = now + _every()
        if final or now >= self.next_line:
            self.next_line = now + _every()
            self.write(format_line(round_no, fields) + "\n")
        if final:
            self.next_line = 0.0  # the next round starts its own interval


def _every() -> float:
    try:
        return float(os.environ.get("BEAMCRAWL_PROGRESS_EVERY", PLAIN_EVERY))
    except ValueError:
        return PLAIN_EVERY
