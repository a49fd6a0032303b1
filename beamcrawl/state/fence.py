"""The round's fence: the ``meta`` rows a fetch loop reads before each request, so that a loop
whose round has failed, been cancelled, lost the crawl's lease or been superseded stops
before its next request (docs/ARCHITECTURE.md §3, Politeness).

Three rows say whether a fetch loop may go on:

- ``attempt``: the round attempt the crawl loop runs now (its token, the round number and the
  start time, and the lease owner that launched it), written before the job starts and
  removed when it has ended, however it ended (pipelines/launch.py). A job Flink failed, or
  one whose launcher gave up on it, leaves workers that find no attempt of theirs.
- ``lease``: the crawl's lease (pipelines/lease.py). An attempt whose launcher no longer
  holds the lease (taken over, released, expired) is fenced too.
- ``fetch-shard/N``: the fetch loop that owns shard N in this attempt (written when its plans
  arrive). A task Flink restarted claims its shards again, and the loop it replaced, perhaps
  still running in a worker Flink has lost track of, finds another claim.

Beside them, each fetch loop of the attempt keeps its running counts in a ``progress/TOKEN/ID``
row (:meth:`StoreFence.publish`, about once a second), which the launcher sums for the live
progress line (:func:`read_progress`): a runner whose workers report their metrics only when
the job ends (Flink with SDK workers outside the launcher) still shows the round as it goes.

:class:`StoreFence` is what the fetch loop calls before each request (core/net/fetcher.py's
``RequestGuard``): it records the host's clock first (state/host_clock.py), then answers from
a reading of these rows no older than :data:`FENCE_TTL`. The writes of the hosts asking at
once go in one batch, and the reading is shared by every host of the loop, so a loop of many
hosts pays one store round trip per batch, not per request.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import time
import uuid
from typing import Any, Mapping

from beamcrawl.core.urls.hostkeys import host_key
from beamcrawl.schemas.records import HostPolicy, HostRecord
from beamcrawl.state.host_clock import CLOCK_AHEAD, clock_cells, read_host
from beamcrawl.state.quarantine import quarantine_policy, quarantined_hosts
from beamcrawl.stores.base import Store, open_store
from beamcrawl.stores.interface import Mutation

log = logging.getLogger(__name__)

LEASE_KEY = b"lease"
LEASE_CELL = "m:lease"
ATTEMPT_KEY = b"attempt"
ATTEMPT_CELL = "m:attempt"
CLAIM_CELL = "m:claim"
PROGRESS_CELL = "m:progress"
PROGRESS_PREFIX = b"progress/"
# How old a reading of the fence rows may be when a request is let through, in seconds: a
# loop whose round was fenced sends nothing later than this (plus one store read) after it.
FENCE_TTL = 0.5
# The bound stated for users and checked by the tests: no request later than this after the
# fence tripped (FENCE_TTL, the read that follows it, and the loop's scheduling).
FENCE_INTERVAL = 1.0
# How far ahead of the clock a host's request time is written at most. A write that lands
# after its margin (a slow store, or a loop too busy to resume the request in time) is written
# again twice as far ahead; a loop that cannot resume a request within this of its write
# stops its shard rather than write again for ever.
MAX_CLOCK_AHEAD = 32.0


def claim_key(shard: int) -> bytes:
    """The ``meta`` row that names the fetch loop owning ``shard`` in the current attempt."""
    return b"fetch-shard/%d" % shard


def attempt_token(round_no: int, started: float) -> str:
    """The token of a round's attempt: its number and start time (a rerun starts later)."""
    return f"{round_no}:{started!r}"


def progress_key(token: str, loop: str) -> bytes:
    """The ``meta`` row of one fetch loop's running counts in attempt ``token``."""
    return PROGRESS_PREFIX + token.encode() + b"/" + loop.encode()


def _progress_range(token: str) -> tuple[bytes, bytes]:
    start = PROGRESS_PREFIX + token.encode() + b"/"
    return start, start[:-1] + b"0"  # "/" + 1


def read_progress(store: Store, token: str) -> dict[str, int]:
    """The attempt's fetch loops' running counts, summed (``{"fetch/success": n, ...}``, the
    names of the fetch stage's counters); rows that do not decode are skipped."""
    total: dict[str, int] = {}
    start, end = _progress_range(token)
    for _key, cells in store.read_range("meta", start, end):
        try:
            counts = json.loads(cells.get(PROGRESS_CELL, b"{}"))
            items = [(str(k), int(v)) for k, v in counts.items()]
        except (ValueError, TypeError, AttributeError):
            continue
        for name, value in items:
            total[name] = total.get(name, 0) + value
    return total


def start_attempt(store: Store, token: str, owner: str | None) -> None:
    """Marks ``token`` as the round attempt running now (launched by lease owner ``owner``)."""
    value = json.dumps({"token": token, "owner": owner, "at": time.time()}).encode()
    store.mutate("meta", [Mutation.set(ATTEMPT_KEY, {ATTEMPT_CELL: value})])


def end_attempt(store: Store, token: str) -> None:
    """Ends attempt ``token`` (if it is still the current one): its fetch loops stop within
    :data:`FENCE_INTERVAL`, wherever they run."""
    current = store.read_keys("meta", [ATTEMPT_KEY]).get(ATTEMPT_KEY, {}).get(ATTEMPT_CELL)
    if current is not None and _field(current, "token") == token:
        store.check_and_set("meta", ATTEMPT_KEY, ATTEMPT_CELL, current, None)
    start, end = _progress_range(token)
    rows = [Mutation.delete_row(key) for key, _ in store.read_range("meta", start, end, keys_only=True)]
    if rows:
        store.mutate("meta", rows)


def revoke_claims(store: Store, shards: int) -> None:
    """Revokes the claims on fetch shards ``0 .. shards-1``: every loop of the attempt stops
    within :data:`FENCE_INTERVAL`, and a loop that starts afterwards claims its shard anew
    (a task Flink restarted after failing the others over)."""
    value = json.dumps({"claim": None, "revoked": time.time()}).encode()
    store.mutate("meta", [Mutation.set(claim_key(s), {CLAIM_CELL: value}) for s in range(shards)])


def _field(raw: bytes | None, name: str) -> Any:
    try:
        value = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    return value.get(name) if isinstance(value, dict) else None


def fence_verdict(
    rows: Mapping[bytes, Mapping[str, bytes]], token: str | None, claims: Mapping[int, str], now: float
) -> tuple[str | None, dict[int, str]]:
    """Why a fetch loop must stop, from a reading of the fence rows.

    Args:
        rows: The ``meta`` rows read (``attempt``, ``lease`` and the claimed shards' rows).
        token: The loop's attempt token; None for a round run outside the crawl loop (a test
            pipeline): then only the shard claims fence it.
        claims: The loop's claim per shard it owns.
        now: Epoch seconds (the lease's expiry is compared with it).

    Returns:
        The reason every shard of the loop stops (None: none), and the reasons of the shards
        that stop alone (another loop claimed them).
    """
    stop: str | None = None
    if token is not None:
        attempt = rows.get(ATTEMPT_KEY, {}).get(ATTEMPT_CELL)
        current = _field(attempt, "token")
        if attempt is None:
            stop = "the round's attempt has ended"
        elif current != token:
            stop = f"the round's attempt was superseded by {current}"
        else:
            owner = _field(attempt, "owner")
            lease = rows.get(LEASE_KEY, {}).get(LEASE_CELL)
            if owner is not None:
                if lease is None:
                    stop = "the crawl's lease was released"
                elif _field(lease, "owner") != owner:
                    stop = f"the crawl's lease was taken by {_field(lease, 'owner')}"
                elif float(_field(lease, "expires") or 0) < now:
                    stop = "the crawl's lease expired"
    lost = {}
    for shard, claim in claims.items():
        held = _field(rows.get(claim_key(shard), {}).get(CLAIM_CELL), "claim")
        if held != claim:
            lost[shard] = f"fetch shard {shard} was claimed by another attempt"
    return stop, lost


class StoreFence:
    """The fetch loop's guard (``RequestGuard``): before each request it records the host's
    clock in the store, then says whether the loop may still send it.

    ``claim`` is called from the DoFn's thread when a shard's plans arrive; ``before_request``
    from the fetch loop. Every store call runs on one thread of the fence's own, in order.
    """

    def __init__(self, store_uri: str, token: str | None) -> None:
        self.store_uri = store_uri
        self.token = token
        self.store: Store | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._claims: dict[int, str] = {}
        self._read_at = float("-inf")  # monotonic time of the last reading of the rows
        self._stop: str | None = None
        self._lost: dict[int, str] = {}
        self._pending: list[tuple[Mutation, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None
        # How far ahead the next clock is written: CLOCK_AHEAD, or more while writes come
        # back late (:meth:`before_request`).
        self.ahead = CLOCK_AHEAD
        # Figures for the bench and the log: store round trips, requests, seconds waited.
        self.flushes = 0
        self.requests = 0
        self.wait_seconds = 0.0

    def __getstate__(self) -> dict[str, Any]:  # pickled with the DoFn before setup
        return {"store_uri": self.store_uri, "token": self.token}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["store_uri"], state["token"])  # type: ignore[misc]

    def open(self) -> None:
        if self.store is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="beamcrawl-fence")
            self.store = self._pool.submit(open_store, self.store_uri).result()

    def claim(self, shard: int) -> None:
        """Claims ``shard`` for this loop (superseding any loop of an earlier try)."""
        self.open()
        assert self._pool is not None and self.store is not None
        claim = uuid.uuid4().hex
        value = json.dumps({"claim": claim, "token": self.token}).encode()
        mutation = Mutation.set(claim_key(shard), {CLAIM_CELL: value})
        store = self.store

        def write() -> None:  # on the fence's thread, so a reading never sees a claim unwritten
            store.mutate("meta", [mutation])
            self._claims[shard] = claim
            self._read_at = float("-inf")  # the next request reads the rows afresh

        self._pool.submit(write).result()

    def publish(self, loop: str, counts: dict[str, int]) -> None:
        """Writes fetch loop ``loop``'s running counts (for the launcher's live progress);
        a failure is logged, never raised (progress is not worth a round)."""
        if self.token is None:
            return
        self.open()
        assert self._pool is not None and self.store is not None
        value = json.dumps(counts, separators=(",", ":")).encode()
        mutation = Mutation.set(progress_key(self.token, loop), {PROGRESS_CELL: value})
        try:
            self._pool.submit(self.store.mutate, "meta", [mutation]).result()
        except Exception as exc:
            log.debug("fetch progress not recorded: %s", exc)

    async def before_request(self, record: HostRecord, shard: int, delay: float) -> str | None:
        """Records the clock of ``record.host`` ahead of a request; returns why the request
        must not be sent (None: send it now, before the written time passes)."""
        self.open()
        loop = asyncio.get_running_loop()
        began = time.monotonic()
        ahead = self.ahead
        try:
            while True:
                written = time.time()
                at = written + ahead
                done: asyncio.Future[None] = loop.create_future()
                self._pending.append((Mutation.set(record.host.encode(), clock_cells(record, at, delay)), done))
                if self._flusher is None or self._flusher.done():
                    self._flusher = loop.create_task(self._flush())
                try:
                    await done
                except Exception as exc:  # the store failed: no clock recorded, no request
                    return f"the host's clock could not be recorded: {type(exc).__name__}: {exc}"
                took = time.time() - written
                if took < ahead:
                    self._landed(took)
                    break
                # The write, or this loop's turn to resume the request after it, took longer
                # than the margin: the request would go out after the time written. Write
                # again, twice as far ahead: the hosts that wrote in the same batch come back
                # at once too, so the same margin might never be enough.
                if ahead >= MAX_CLOCK_AHEAD:
                    return (
                        f"the host's clock could not be recorded ahead of the request: {took:.1f} s "
                        f"to write and resume, over {MAX_CLOCK_AHEAD:g} s"
                    )
                ahead = min(2 * ahead, MAX_CLOCK_AHEAD)
                self.ahead = max(self.ahead, ahead)
        finally:
            self.wait_seconds += time.monotonic() - began
        self.requests += 1
        return self._stop or self._lost.get(shard)

    async def stored_clock(self, host: str) -> HostRecord | None:
        """The record the store has for ``host``, its clock cell merged in (what the next
        round's planner would read), or None when it has none or the read failed: for a
        robots.txt hop to a host with no plan in this loop, whose clock the loop starts."""
        self.open()
        assert self._pool is not None and self.store is not None
        key = host.encode()
        try:
            rows = await asyncio.get_running_loop().run_in_executor(self._pool, self.store.read_keys, "hosts", [key])
            cells = rows.get(key)
            return read_host(host, cells) if cells else None
        except Exception as exc:  # the request's own clock write will meet the store's trouble
            log.warning("the stored clock of %s could not be read: %s", host, exc)
            return None

    async def stored_policy(self, host: str) -> HostPolicy | None:
        """The operator's policy for ``host`` as the planner reads it (set on its slot, or on
        its bare name; a quarantined host is paused without end), or None when there is none
        or the read failed: for a robots.txt hop to a host with no plan in this loop."""
        self.open()
        assert self._pool is not None and self.store is not None
        store = self.store
        bare = host_key(host)

        def read() -> HostPolicy | None:
            rows = store.read_keys("policies", sorted({host.encode(), bare.encode()}))
            policy = HostPolicy.from_cells(host, rows.get(host.encode()) or rows.get(bare.encode()))
            if quarantined_hosts(store, [host]):
                policy = quarantine_policy(host, policy)
            return policy

        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, read)
        except Exception as exc:  # the request's own clock write will meet the store's trouble
            log.warning("the policy of %s could not be read: %s", host, exc)
            return None

    async def record_clock(self, record: HostRecord) -> None:
        """Records the clock of ``record.host`` after a response that no host record of this
        loop may carry into the store (a robots.txt hop to a host with no plan here, or one
        whose plan is done): its end, and the delay and holds it set (a Retry-After, a
        back-off). A failed write is logged: the next request's clock is written anyway."""
        self.open()
        loop = asyncio.get_running_loop()
        end = record.last_fetch_end
        done: asyncio.Future[None] = loop.create_future()
        self._pending.append((Mutation.set(record.host.encode(), clock_cells(record, end, record.delay)), done))
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        try:
            await done
        except Exception as exc:
            log.warning("the clock of %s after a robots.txt hop was not recorded: %s", record.host, exc)

    def _landed(self, took: float) -> None:
        """A clock written in time, ``took`` seconds from its write to the request's resuming:
        the margin of the next comes back toward CLOCK_AHEAD while writes take under a
        quarter of it (a later time written is only a longer wait for a rerun)."""
        if self.ahead > CLOCK_AHEAD and took < self.ahead / 4:
            self.ahead = max(CLOCK_AHEAD, self.ahead * 0.9)

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            batch, self._pending = self._pending, []
            read = time.monotonic() - self._read_at > FENCE_TTL
            try:
                rows = await loop.run_in_executor(self._pool, self._write_and_read, [m for m, _ in batch], read)
            except Exception as exc:
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            self.flushes += 1
            if rows is not None:
                meta, claims = rows
                self._stop, lost = fence_verdict(meta, self.token, claims, time.time())
                self._lost.update(lost)
            for _, done in batch:
                if not done.done():
                    done.set_result(None)

    def _write_and_read(
        self, mutations: list[Mutation], read: bool
    ) -> tuple[dict[bytes, dict[str, bytes]], dict[int, str]] | None:
        """On the fence's thread: the clock cells written, then (if due) the fence rows read,
        after the write, so the reading is no older than the write it goes with; returns the
        rows and the claims they were read for."""
        assert self.store is not None
        self.store.mutate("hosts", mutations)
        if not read:
            return None
        began = time.monotonic()
        claims = dict(self._claims)
        keys = [ATTEMPT_KEY, LEASE_KEY, *(claim_key(s) for s in sorted(claims))]
        rows = self.store.read_keys("meta", keys)
        self._read_at = began
        return rows, claims

    def close(self) -> None:
        if self._pool is not None:
            if self.store is not None:
                self._pool.submit(self.store.close).result()
            self._pool.shutdown(wait=True)
        self.store = None
        self._pool = None
