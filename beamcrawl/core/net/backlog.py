"""The fetch loop's backlog: results it emitted that the stage has not yet taken to parse.

The fetch loop runs on a thread of its own and hands results to the DoFn's thread, which
parses each one (and whatever else is fused after the fetch) before it takes the next. When
the loop fetches faster than that thread works through its results, the difference waits in
between, bodies and all: measured with every host of a 3,000-host web in flight, 422 MB after
a 60 s window and 1,170 MB after a 180 s one, so a round's peak grew with its window.

:class:`Backlog` bounds it by bytes. The loop adds each result's size as it emits it, the
draining thread subtracts it as it takes it, and before a request goes out the loop waits
while more than ``limit`` bytes are held, until the stage has worked the backlog down to half
of that. Waiting only ever delays a request, so no host is asked sooner than its clock says;
the round window still ends the crawl (a request whose turn comes after it is deferred).

What the bound leaves out is what is already on the wire: at most one response per host in
flight (``--max-hosts-in-flight``), each within the body caps.
"""

from __future__ import annotations

import asyncio
import time

from beamcrawl.schemas.records import FetchResult

# What a result holds besides its bodies (its Python objects: headers, entry, strings), bytes.
RESULT_OVERHEAD = 2048
# How often, seconds, the loop looks whether a full backlog has been worked down.
POLL = 0.02


def result_bytes(result: FetchResult) -> int:
    """The bytes a result holds while it waits: its bodies (once when they are one object) and
    :data:`RESULT_OVERHEAD`."""
    raw, body = result.raw_body, result.body
    return RESULT_OVERHEAD + len(raw) + (0 if body is raw else len(body))


class Backlog:
    """Bytes emitted by the fetch loop and not yet taken by the stage, with a bound.

    Two counters with one writer each (:meth:`put` on the loop's thread, :meth:`took` on the
    draining thread), so neither needs a lock: the backlog is their difference.
    """

    def __init__(self, limit: int, poll: float = POLL) -> None:
        self.limit = limit
        self.resume_at = limit // 2
        self.poll = poll
        self.emitted = 0  # written by the loop's thread only
        self.taken = 0  # written by the draining thread only
        self.peak = 0  # the most held when a result was emitted
        self.waits = 0  # requests that waited for room
        self.waited = 0.0  # seconds they waited, summed
        self._room: asyncio.Event | None = None
        self._watch: asyncio.Task[None] | None = None

    def held(self) -> int:
        """Bytes emitted and not yet taken."""
        return self.emitted - self.taken

    def put(self, size: int) -> None:
        """A result of ``size`` bytes was emitted (the loop's thread)."""
        self.emitted += size
        held = self.emitted - self.taken
        if held > self.peak:
            self.peak = held

    def took(self, size: int) -> None:
        """A result of ``size`` bytes was taken by the stage (the draining thread)."""
        self.taken += size

    async def room(self) -> float:
        """Returns at once while the backlog is within the limit; otherwise waits until the
        stage has worked it down to half of it. Returns the seconds waited."""
        if self.emitted - self.taken <= self.limit:
            return 0.0
        began = time.monotonic()
        if self._room is None:
            self._room = asyncio.Event()
        if self._watch is None:  # one watcher for every waiting request
            self._room.clear()
            self._watch = asyncio.get_running_loop().create_task(self._worked_down(self._room))
        await self._room.wait()
        waited = time.monotonic() - began
        self.waits += 1
        self.waited += waited
        return waited

    async def _worked_down(self, room: asyncio.Event) -> None:
        try:
            while self.emitted - self.taken > self.resume_at:
                await asyncio.sleep(self.poll)
        finally:
            self._watch = None
            room.set()
