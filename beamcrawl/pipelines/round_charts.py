"""The crawl's charts redrawn after each round, in a process of their own.

Drawing the six PNG charts of ``beamcrawl report`` (matplotlib: figures laid out, rastered
and compressed) takes 1-2 s of CPU. Drawn in the crawl's process, the next round waited for
them, every round, whatever its size. Here a child process draws them
(``python -m beamcrawl.analysis.charts OUT``) while the next round starts.

- One drawing at a time. Each one draws every round so far, so a round that ends while one is
  still under way only marks the charts stale; they are redrawn at the next chance (the next
  round's end, a wait for URLs to fall due, or the crawl's end).
- At most a twentieth of the crawl's time: the next drawing starts no sooner than
  ``SPACING`` times the last one's wall after that one started (a 2 s drawing: every 40 s at
  most). Rounds of a minute are drawn after every round; a crawl of many short rounds is
  drawn every few rounds, instead of spending as much CPU on its charts as on its pages.
- When the crawl ends, it waits for the drawing under way and draws once more if a round ended
  meanwhile: once the command returns, the charts cover every round it ran.
- An interrupted crawl does not wait: the drawing runs in a session of its own (the
  terminal's Ctrl-C is the crawl's, not its) and finishes by itself.
- What the child says on stderr (``report charts not drawn: ...``) is logged here as a warning;
  a child that dies without a word is one warning too. A chart never fails a round.
"""

from __future__ import annotations

import logging
import os
import shutil
import site
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import beamcrawl
from beamcrawl.pipelines.crawl_errors import RoundInterrupted

log = logging.getLogger(__name__)

WAIT_AT_END_S = 120.0  # a drawing that takes longer is stopped: the crawl has ended
NICENESS = 10  # the drawing's priority below the crawl's
SPACING = 20.0  # the next drawing starts no sooner than this many times the last one's wall


def drawing_command(out: str) -> list[str]:
    """The child's command line: this Python, the charts module, the crawl's output folder;
    under ``nice`` where there is one (the round's fetch and parse come first: on two cores a
    drawing at the same priority cost a round some of its window's slots)."""
    command = [sys.executable, "-m", "beamcrawl.analysis.charts", out]
    nice = shutil.which("nice")
    return [nice, "-n", str(NICENESS), *command] if nice else command


def child_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The drawing's environment: the crawl's, with this beamcrawl's folder first on
    ``PYTHONPATH`` when it is a source tree (a checkout, an editable install, a path a script
    added), so that the child draws with the code the crawl runs. An installed beamcrawl
    (its folder a site-packages) is found by the child as it is: putting site-packages
    ahead of the standard library would let a package there shadow a standard module."""
    env = dict(environ)
    root = Path(beamcrawl.__file__).resolve().parent.parent
    installed = {Path(p).resolve() for p in (*site.getsitepackages(), site.getusersitepackages())}
    if root not in installed:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    return env


class RoundCharts:
    """Starts the charts' drawing after each round without waiting for it.

    Args:
        out: The crawl's output folder (its ``reports/`` gets the PNGs).
        command: The child's command line (default :func:`drawing_command`); tests give a
            stand-in.
        wait_at_end: Seconds :meth:`close` waits for a drawing before stopping it.
        spacing: The next drawing starts no sooner than this many times the last one's own
            wall after its start (0: as soon as the last one has ended).
    """

    def __init__(
        self,
        out: str,
        command: Sequence[str] | None = None,
        wait_at_end: float = WAIT_AT_END_S,
        spacing: float = SPACING,
    ) -> None:
        self.command = list(command) if command is not None else drawing_command(out)
        self.wait_at_end = wait_at_end
        self.spacing = spacing
        self.stale = False  # a round ended after the drawing under way had read the reports
        self.started = 0  # drawings started, for the crawl's log and for tests
        self.next_at = 0.0  # time.monotonic() before which no drawing starts but the last
        self._proc: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0

    def round_done(self) -> None:
        """A round was committed: draw the charts again, now or when the one under way ends."""
        self.stale = True
        self.catch_up()

    def catch_up(self) -> None:
        """Starts the redrawing a round asked for if the drawing under way has ended and the
        last one's spacing has passed (the crawl loop calls it while it waits for URLs to fall
        due, too)."""
        if self.stale and self._reap() and time.monotonic() >= self.next_at:
            self._start()

    def close(self, *, wait: bool = True) -> None:
        """The crawl ends: with ``wait``, the drawing under way finishes (or is stopped after
        ``wait_at_end`` s) and a stale one is redrawn; without it, one under way is left to
        finish by itself."""
        if not wait:
            self._proc = None  # its own session: it ends by itself, the crawl does not wait
            return
        self._finish()
        if self.stale:
            self._start()
            self._finish()

    def __enter__(self) -> RoundCharts:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        interrupted = exc_type is not None and issubclass(exc_type, (KeyboardInterrupt, RoundInterrupted))
        self.close(wait=not interrupted)

    def _start(self) -> None:
        try:
            self._proc = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,  # the seconds it took, its last line
                stderr=subprocess.PIPE,
                env=child_env(),
                start_new_session=True,
            )
        except OSError as exc:
            log.warning("report charts not drawn: could not start the drawing process: %s", exc)
            self._proc = None
            return
        self.stale = False
        self.started += 1
        self._started_at = time.monotonic()

    def _reap(self) -> bool:
        """True when no drawing is under way (the last one's words logged)."""
        if self._proc is None:
            return True
        if self._proc.poll() is None:
            return False
        self._finish()  # exited: reads what it said, at once
        return True

    def _finish(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        try:
            told, said = proc.communicate(timeout=self.wait_at_end)
            took = drawing_seconds(told, time.monotonic() - self._started_at)
            self.next_at = self._started_at + self.spacing * took
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            log.warning("report charts not drawn: the drawing took more than %g s and was stopped", self.wait_at_end)
            return
        _report(proc.returncode, said)


def drawing_seconds(told: bytes, otherwise: float) -> float:
    """The drawing's own wall, as it told it (its stdout's last line); ``otherwise`` (the time
    since it started, which counts the wait until the crawl loop looked) if it did not."""
    try:
        took = float(told.split()[-1])
    except (IndexError, ValueError):
        return otherwise
    return took if 0.0 <= took <= otherwise else otherwise


def _report(returncode: int | None, said: bytes) -> None:
    """Logs what a finished drawing said: its own warning line, or why it died."""
    lines = [line for line in said.decode("utf-8", "replace").splitlines() if line.strip()]
    if returncode == 0:
        for line in lines[-5:]:  # "report charts not drawn: ..." when a chart failed
            log.warning("%s", line)
    else:  # it died: an import failed, a signal; its last line says why
        why = f": {lines[-1].strip()}" if lines else ""
        how = (
            f"was killed by signal {-returncode}"
            if returncode is not None and returncode < 0
            else f"exited with status {returncode}"
        )
        log.warning("report charts not drawn: the drawing process %s%s", how, why)
