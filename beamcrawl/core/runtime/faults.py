"""Crash points: named places where a test can make the crawler die as a crash would.

``BEAMCRAWL_CRASH_AT=NAME`` (or ``NAME@N`` for the N-th time the point is reached in this
process) makes :func:`crash_point` kill its own process with SIGKILL at that point: no
``finally`` blocks, no lease release, no flushing — what a power cut or an OOM kill leaves.
Unset (always, outside tests), a crash point costs one environment lookup.

Points in use (tests/pipelines/test_crash_safety.py kills a crawl at each):

    url_seen.after_frontier_write   new URLs queued, not yet marked seen
    compact.merged                  a round's small files merged, their sources not deleted
    commit.before                   round job finished, nothing committed
    commit.after_files              files moved into place, next visits not queued
    commit.after_requeue            next visits queued, finished frontier rows not deleted
    commit.after_frontier_deletes   frontier rows deleted, round counter not advanced

Element faults (``BEAMCRAWL_FAIL_ELEMENT``, :func:`element_faults`) make one element raise
in a stage instead, to show that it is set aside and the round goes on.
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


# --- per-element faults -------------------------------------------------------------------------

ELEMENT_ENV = "BEAMCRAWL_FAIL_ELEMENT"


class InjectedFault(Exception):
    """An element failure a test asked for (``BEAMCRAWL_FAIL_ELEMENT``)."""


class InjectedInfrastructureFault(Exception):
    """An infrastructure failure a test asked for (``...=STAGE:TEXT:infra``): the store or
    the output filesystem gone, which must fail the round."""


def element_faults(stage: str) -> list[tuple[str, bool]]:
    """The element faults asked for in ``stage``: ``(text, infrastructure)`` pairs.

    ``BEAMCRAWL_FAIL_ELEMENT=STAGE:TEXT[:infra][,STAGE:TEXT...]`` makes every element of
    ``STAGE`` whose key, URL or host contains ``TEXT`` (or ends with it: ``TEXT$``) raise
    :class:`InjectedFault` (or, with ``:infra``, :class:`InjectedInfrastructureFault`) where
    the stage handles it, so a test can make one element fail in each stage
    (transforms/dead_letter.py). Read once per DoFn instance: unset, a stage pays one
    comparison per element.
    """
    spec = os.environ.get(ELEMENT_ENV, "")
    out = []
    for part in spec.split(","):
        wanted, _, text = part.partition(":")
        infra = text.endswith(":infra")  # TEXT may hold colons (host:port)
        text = text[: -len(":infra")] if infra else text
        if wanted == stage and text:
            out.append((text, infra))
    return out


def fail_element(stage: str, faults: list[tuple[str, bool]], *texts: str) -> None:
    """Raises the fault of the first of ``faults`` found in any of ``texts`` (a ``TEXT``
    ending in ``$`` must end the text: ``host:8080/$`` is that host's root URL only)."""
    for text, infra in faults:
        anchored = text.endswith("$")
        if any((t.endswith(text[:-1]) if anchored else text in t) for t in texts if t):
            kind = InjectedInfrastructureFault if infra else InjectedFault
            raise kind(f"injected fault in {stage} for {text!r}")
