"""A portable runner's own output during a crawl: kept off the console, in the crawl's log.

On the in-process runner a round that fails reaches the user as one line naming the worker's
exception. On a portable runner (Flink, Prism: a job service runs the job, and with LOOPBACK
its Python SDK workers are threads of this process) three others speak at the same moment:
Beam's SDK harness prints a failed bundle's traceback on stderr itself and logs it again,
the portable runner relays every job message (the error's text holds the worker's traceback)
through the root logger, and Prism's job service logs its own lines through Beam's. And the
exception the round gets is the runner's ``RuntimeError``, whose text is the job's error.

While a crawl runs on such a runner, :class:`RunnerOutput` sends everything but the crawl's
own lines to its log file (the crawl's log, ``OUT/logs/crawl-<time>.log``; a temporary file
when the output folder is on an object store): what a thread other than the launcher's own
writes to ``sys.stderr``, and every log record that is not beamcrawl's from a launcher
thread. Threads the runner started that outlive the crawl (a failed job's SDK workers, torn
down only when the process exits) keep writing there until the process ends.
:func:`worker_exception` takes the worker's exception out of the job's error text, for the
round's one line, which names that log file.

Not covered: SDK workers in processes whose stderr is not this process's (a Flink cluster's
worker pool, Docker containers) write where their own process writes; and with Beam's
``--experiments=use_loopback_process_worker`` the LOOPBACK workers are child processes that
inherit this process's stderr file descriptor, which this module does not redirect.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from beamcrawl.pipelines.runner_args import runner_name

if TYPE_CHECKING:
    from beamcrawl.pipelines.crawl_log import CrawlLog

__all__ = ["RunnerOutput", "is_portable", "worker_exception"]

# Runners whose job runs behind a job service, its messages relayed through logging.
PORTABLE_RUNNERS = ("flink", "prism", "portable", "spark")
# The launcher's own threads (besides the main thread): their lines are the crawl's.
LAUNCHER_THREADS = ("beamcrawl-progress", "beamcrawl-lease", "beamcrawl-flink-failover")

_MARKER = "Traceback (most recent call last):"
# An exception's line as Python prints it: a dotted type name, then ": message" (or nothing).
_EXCEPTION_LINE = re.compile(r"([^\W\d][\w.]*)(?:: (.*))?", re.DOTALL)
# What Beam appends to the message of an exception it re-raises from a step.
_STEP = " [while running "


def is_portable(args: Sequence[str]) -> bool:
    """True when ``args`` run the round on a portable runner (Flink, Prism, a job endpoint)."""
    return runner_name(args).lower().removesuffix("runner") in PORTABLE_RUNNERS


def worker_exception(text: str) -> str | None:
    """The worker's exception in a job's error text, as ``Type: first line of its message``.

    The text (a job service's error: Flink's "Error received from SDK harness ...: ", Prism's
    "bundle ... failed:") holds the Python traceback the worker sent. Its last exception is
    the one the worker raised: its type (without its module) and the first line of its
    message, with Beam's ``[while running 'step']`` dropped. Where Beam could not re-raise
    the exception as its own type and raised a ``RuntimeError`` quoting it instead, the
    quoted exception is named.

    Returns:
        The line, or None when the text holds no Python traceback.
    """
    lines = text.split("\n")
    # Each exception in the order printed: its type, its message's first line and its own
    # first line as printed (Beam's step annotation cut from both).
    found: list[tuple[str, str, str]] = []
    i = 0
    while i < len(lines):
        if not lines[i].rstrip().endswith(_MARKER):
            i += 1
            continue
        i += 1
        while i < len(lines) and lines[i][:1].isspace():  # frames, their code and carets
            i += 1
        match = _EXCEPTION_LINE.fullmatch(lines[i]) if i < len(lines) else None
        if match is not None:
            found.append((match.group(1), _first(match.group(2) or ""), _first(lines[i])))
    if not found:
        return None
    kind, message, _ = found[-1]
    if kind == "RuntimeError":  # Beam's stand-in for an exception it could not rebuild
        quoted = [(k, m) for k, m, printed in found[:-1] if printed.rstrip() == message.rstrip()]
        if quoted:
            kind, message = quoted[-1]
    short = kind.rsplit(".", 1)[-1]
    message = message.strip()
    return f"{short}: {message}" if message else short


def _first(text: str) -> str:
    """The first line of ``text`` (as ``str.splitlines`` cuts), without Beam's annotation."""
    lines = text.splitlines()
    return lines[0].split(_STEP)[0] if lines else ""


def _is_launcher_thread(ident: int | None, name: str | None) -> bool:
    return ident == threading.main_thread().ident or name in LAUNCHER_THREADS


class _Stderr:
    """``sys.stderr`` during the crawl: the launcher's threads write to the console, any
    other thread (the SDK harness's, gRPC's, the runner's) to the log."""

    def __init__(self, console: TextIO, log: Callable[[str], None]) -> None:
        self.console = console
        self.log = log

    def write(self, text: str) -> int:
        current = threading.current_thread()
        if _is_launcher_thread(current.ident, current.name):
            return self.console.write(text)
        self.log(text)
        return len(text)

    def flush(self) -> None:
        self.console.flush()

    def isatty(self) -> bool:
        return self.console.isatty()

    def fileno(self) -> int:
        return self.console.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console, name)


class _CrawlLinesOnly(logging.Filter):
    """On the console: beamcrawl's own records from the launcher's threads, nothing else."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.startswith("beamcrawl") and _is_launcher_thread(record.thread, record.threadName)


class RunnerOutput:
    """Keeps a portable runner's output off the console while a crawl runs, in a log file.

    Args:
        record: The crawl's log; where it has no file (an object-store output folder), a
            temporary file takes its place.
    """

    def __init__(self, record: CrawlLog) -> None:
        self._record = record
        self._own: TextIO | None = None
        self._own_handler: logging.Handler | None = None
        self._lock = threading.Lock()
        self._filter = _CrawlLinesOnly()
        self._consoles: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._stderr: _Stderr | None = None
        self._previous_stderr: Any = None
        self._before: set[threading.Thread] = set()
        self.path = record.path

    def write(self, text: str) -> None:
        """Writes ``text`` to the log file as it is."""
        if self._own is not None:
            with self._lock:
                self._own.write(text)
        else:
            self._record.write(text)

    def note(self, title: str, text: str) -> None:
        """Writes a stamped heading and ``text`` (a failed job's whole error) to the log."""
        from beamcrawl.pipelines.crawl_log import stamped

        self.write(stamped(title, text))

    def __enter__(self) -> "RunnerOutput":
        import sys

        from beamcrawl.pipelines.crawl_log import FORMAT

        if self.path is None:
            fd, self.path = tempfile.mkstemp(prefix="beamcrawl-crawl-", suffix=".log")
            self._own = os.fdopen(fd, "a", encoding="utf-8", buffering=1)
            self._own_handler = logging.StreamHandler(self._own)
            self._own_handler.setLevel(logging.INFO)
            self._own_handler.setFormatter(logging.Formatter(FORMAT))
            logging.getLogger().addHandler(self._own_handler)
        console = sys.stderr
        self._previous_stderr = console
        self._stderr = _Stderr(console, self.write)
        for handler in logging.getLogger().handlers:
            # The console's handlers: they write to this process's stderr or stdout.
            stream = getattr(handler, "stream", None)
            if isinstance(handler, logging.StreamHandler) and stream in (console, sys.stdout):
                handler.addFilter(self._filter)
                # On the stand-in for stderr, which the progress bar's logging redirect
                # (tqdm) recognises as the console's stream.
                previous = handler.setStream(self._stderr) if stream is console else None
                self._consoles.append((handler, previous))
        sys.stderr = self._stderr
        self._before = set(threading.enumerate())
        return self

    def lingering(self) -> list[threading.Thread]:
        """The threads started since the crawl began that are still alive, not the launcher's."""
        return [
            t
            for t in threading.enumerate()
            if t not in self._before and t.is_alive() and not _is_launcher_thread(t.ident, t.name)
        ]

    def _linger(self) -> None:
        """Leaves the runner's output going to the log until the process ends.

        The runner's threads can outlive the crawl: after a failed job, Prism's LOOPBACK SDK
        workers are torn down only when the process exits and Beam stops the job service
        (their teardown, with the interpreter shutting down, fails and says so), and Beam
        logs that stop. The log file gets a handle of this object's own, as the crawl's log
        is closing; the console keeps its filter and ``sys.stderr`` its stand-in, which the
        launcher's threads write through to the console as before.
        """
        from beamcrawl.pipelines.crawl_log import FORMAT

        if self._own is not None or self.path is None:
            return  # already on a file of its own
        with self._lock:
            self._own = open(self.path, "a", encoding="utf-8", buffering=1)
        handler = logging.StreamHandler(self._own)
        handler.setLevel(logging.INFO)
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.addFilter(lambda record: not self._filter.filter(record))  # what the console no longer shows
        logging.getLogger().addHandler(handler)
        self._own_handler = handler

    def __exit__(self, *exc: object) -> None:
        if self.lingering():
            self._linger()
        else:
            self.close()

    def close(self) -> None:
        """Puts the console back as it was (``sys.stderr``, its log handlers) and closes the
        file of its own, if any."""
        import sys

        if sys.stderr is self._stderr:
            sys.stderr = self._previous_stderr
        for handler, previous in self._consoles:
            handler.removeFilter(self._filter)
            if previous is not None:
                handler.setStream(previous)
        self._consoles = []
        if self._own_handler is not None:
            logging.getLogger().removeHandler(self._own_handler)
            self._own_handler = None
        if self._own is not None:
            with self._lock:
                self._own.close()
            self._own = None


@contextlib.contextmanager
def kept_off_console(args: Sequence[str], record: CrawlLog) -> Iterator[RunnerOutput | None]:
    """A :class:`RunnerOutput` while a crawl on a portable runner runs; None in process."""
    if not is_portable(args):
        yield None
        return
    with RunnerOutput(record) as output:
        yield output
