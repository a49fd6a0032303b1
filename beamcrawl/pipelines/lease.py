"""The crawl's lease: a conditional write in the store's ``meta`` table, held while rounds run,
so two rounds never run at once on one crawl (renewed by a thread; a dead local owner
releases it at once)."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid

from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.pipelines.crawl_errors import CrawlError
from beamcrawl.state.fence import LEASE_KEY
from beamcrawl.stores.base import Store

log = logging.getLogger(__name__)


class LeaseHeld(CrawlError):
    """Another round of this crawl is running (a scheduled launch should just stop)."""


class LeaseLost(CrawlError):
    """The crawl's lease was taken over or could not be renewed while a round ran: that
    round must not commit (another run may be working on the same frontier)."""


class RoundLease:
    """The crawl's lease: held while a round runs, so rounds never overlap on one crawl.

    Held for as long as the crawl runs, however long its rounds take: a thread renews it
    (``check_and_set`` from the value this process wrote, every ``renew_every`` seconds) for
    another ``ttl``. A renewal that finds another value has lost the lease, and so has a
    lease that expired unrenewed; :meth:`check`, called before each commit, then raises
    :class:`LeaseLost`.
    """

    def __init__(self, store: Store, ttl: float | None = None, renew_every: float | None = None) -> None:
        self.store = store
        # Unless told: as long as a round with the default window may hold it (lease_ttl).
        ttl = lease_ttl(CrawlConfig.round_window) if ttl is None else ttl
        self.ttl = ttl
        self.renew_every = renew_every if renew_every is not None else max(0.05, ttl / 4)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.value: bytes | None = None
        self.acquired = 0.0
        self.lost: str | None = None  # why the lease is no longer ours, once it is not
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _row(self, now: float) -> bytes:
        return json.dumps({"owner": self.owner, "acquired": self.acquired, "expires": now + self.ttl}).encode()

    def acquire(self) -> None:
        current = self.store.read_keys("meta", [LEASE_KEY]).get(LEASE_KEY, {}).get("m:lease")
        if current is not None:
            held = json.loads(current)
            if held.get("expires", 0) > time.time() and not _owner_gone(held.get("owner", ""), held.get("acquired")):
                raise LeaseHeld(
                    f"another round of this crawl is running (lease held by {held.get('owner')} "
                    f"until {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(held['expires']))})"
                )
        self.acquired = time.time()
        mine = self._row(self.acquired)
        if not self.store.check_and_set("meta", LEASE_KEY, "m:lease", current, mine):
            raise LeaseHeld("another round of this crawl took the lease just now")
        self.value = mine
        self.lost = None
        _HELD_HERE.add(self.owner)
        self._stop.clear()
        self._renewer = threading.Thread(target=self._keep, name="beamcrawl-lease", daemon=True)
        self._renewer.start()

    def _keep(self) -> None:
        while not self._stop.wait(self.renew_every):
            if not self.renew():
                return

    def renew(self) -> bool:
        """Extends the lease by ``ttl`` from now; False once it is lost."""
        with self._lock:
            if self.value is None or self.lost is not None:
                return False
            now = time.time()
            held_until = json.loads(self.value).get("expires", 0)
            fresh = self._row(now)
            try:
                renewed = self.store.check_and_set("meta", LEASE_KEY, "m:lease", self.value, fresh)
            except Exception as exc:  # the store unreachable for a moment: try again later
                log.warning("could not renew the crawl's lease: %s", exc)
                if now > held_until:
                    self.lost = f"it expired at {_when(held_until)} while the store was unreachable"
                    return False
                return True
            if renewed:
                self.value = fresh
                return True
            self.lost = self._taken_by()
            log.error("the crawl's lease was lost: %s", self.lost)
            return False

    def _taken_by(self) -> str:
        current = self.store.read_keys("meta", [LEASE_KEY]).get(LEASE_KEY, {}).get("m:lease")
        if current is None:
            return "its row was removed"
        try:
            return f"taken by {json.loads(current).get('owner')}"
        except (ValueError, AttributeError):
            return "its row was overwritten"

    def check(self, what: str) -> None:
        """Raises LeaseLost (``"<what>: ..."``, one line) unless this process still holds
        the lease, as read from the store now."""
        with self._lock:
            if self.lost is None and self.value is not None:
                current = self.store.read_keys("meta", [LEASE_KEY]).get(LEASE_KEY, {}).get("m:lease")
                expires = json.loads(self.value).get("expires", 0)
                if current != self.value:
                    self.lost = self._taken_by()
                elif expires < time.time():
                    self.lost = f"it expired at {_when(expires)} unrenewed"
            lost = self.lost if self.value is not None else "it was never acquired"
        if lost is not None:
            raise LeaseLost(f"{what}: the crawl's lease was lost ({lost}); another run may hold it")

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=30)
            self._renewer = None
        with self._lock:
            if self.value is not None:
                if self.lost is None:  # never remove another owner's lease
                    self.store.check_and_set("meta", LEASE_KEY, "m:lease", self.value, None)
                self.value = None
                _HELD_HERE.discard(self.owner)

    def __enter__(self) -> "RoundLease":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


# Owners of the leases this process holds now: its own pid in a lease is a live owner
# only if listed here (else an earlier process had the same pid: a container rerun).
_HELD_HERE: set[str] = set()


def _owner_gone(owner: str, acquired: float | None = None) -> bool:
    """True when the lease's owner was a process on this machine that no longer runs
    (a crawl killed mid-round), so a rerun need not wait for the lease to expire.

    A pid can be reused: by this very process (a crawl rerun in a fresh container often
    gets the pid its killed predecessor had), or by any process started after the lease
    was taken (``acquired``, where the lease records it); neither is the owner.
    """
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return owner not in _HELD_HERE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, another user's
    started = _process_started(pid)
    # The tolerance covers the start time's tick resolution and clock adjustments.
    return started is not None and acquired is not None and started > acquired + 2.0


def _process_started(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds), from /proc; None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/stat", encoding="ascii") as fh:
            boot = next(float(line.split()[1]) for line in fh if line.startswith("btime "))
        # Field 22 of stat (20th after the ")"-terminated command name): start, in ticks.
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def lease_ttl(round_window: float) -> float:
    """How long a round's lease lasts: its fetch window plus ample room for job start-up
    and tear-down on a cluster. A crashed launcher on another machine blocks the crawl at
    most this long; a dead local process releases it at once (see _owner_gone)."""
    return 3 * round_window + 3600.0
