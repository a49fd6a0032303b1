"""Idle crawls: when no URL is due, say when one will be and why, then wait for it.

A round is a Beam job of several seconds; one with nothing to fetch does nothing useful,
and a crawl of many rounds whose frontier is all deferred (domain budgets, revisits
scheduled for tomorrow, a paused host) would otherwise launch empty jobs back to back.
Before each round the crawl loop asks :func:`wait_until_due`, which looks at the store
cheaply and in batches (never per URL):

- the frontier is keyed by due time first, so the rows due now are one range scan from
  the start of the table, and the next row to fall due is the first key after it;
- the hosts of the due rows are read with batched key-set reads (records and policies, as
  the round's Select stage reads them) to see whether every one of them is held
  (blocked, paused, or held off by Retry-After or back-off past the round window), in
  which case the round would fetch nothing either.

When nothing can be fetched it prints one line saying when the next URL falls due and
why the rest waits (a sample of the rows after it, by reason), and either sleeps until
then (re-checking every :data:`RECHECK_SECONDS`, so a ``beamcrawl submit`` made meanwhile
is picked up) or, with ``--exit-when-idle``, lets a scheduled run end there. The wait is
not a round: no job runs, no report is written and the round counter does not move.
"""

from __future__ import annotations

import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, TextIO

from beamcrawl.core.net.resolver import hostname_of
from beamcrawl.core.policy import politeness
from beamcrawl.core.runtime import interruptible
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.schemas.records import (
    FrontierEntry,
    HostPolicy,
    frontier_key,
)
from beamcrawl.state.host_clock import read_host
from beamcrawl.stores.base import Store

__all__ = ["Idle", "check_idle", "wait_until_due"]

# Due rows looked at, at most, before deciding a round is worth running anyway (a huge due
# set is the round's job to sort out, at the scale Beam gives it).
MAX_DUE_SCAN = 50_000
# Rows read per batch of the due scan (one key-set read of their hosts per batch).
CHUNK = 2_000
# Rows after the next due one sampled to say why they wait.
SAMPLE = 10_000
# While waiting, the store is looked at again this often: URLs submitted meanwhile, or a
# policy lifted, end the wait early.
RECHECK_SECONDS = 60.0

# Why a host with due URLs gets no slots (assign_slots.hold_reason), as the line says it.
_HOLD_WORDS = {
    "blocklisted": "on hosts named by --blocklist",
    "blocked": "on hosts blocked by policy",
    "paused": "on hosts paused by policy",
    "refused": "on hosts that refused the crawler (beamcrawl hosts show)",
    "held": "on hosts held off by Retry-After or back-off",
}


@dataclass
class Idle:
    """Nothing can be fetched now.

    Attributes:
        now: When the store was looked at (epoch seconds).
        wake_at: When the first URL can be fetched (epoch seconds): the next due row, or
            the end of a pause or hold; None when nothing will fall due by itself.
        waiting: URLs by why they wait (a sample when ``sampled``).
        sampled: Whether ``waiting`` counts only the first rows of the frontier.
    """

    now: float
    wake_at: float | None
    waiting: Counter[str] = field(default_factory=Counter)
    sampled: bool = False

    def message(self) -> str:
        """One line: when the next URL falls due, and why the rest waits."""
        if not self.waiting:
            return "nothing to crawl: the frontier is empty (queue URLs with `beamcrawl submit`)"
        if self.wake_at is None:
            head = "nothing due, and nothing will fall due by itself"
        else:
            head = (
                f"nothing due now; the next URL falls due at {_iso(self.wake_at)} (in {_span(self.wake_at - self.now)})"
            )
        parts = [f"{n} {word}" for word, n in sorted(self.waiting.items(), key=lambda kv: (-kv[1], kv[0]))]
        scope = f" (of the first {sum(self.waiting.values())} queued)" if self.sampled else ""
        return f"{head}; waiting{scope}: {', '.join(parts)}"


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _span(seconds: float) -> str:
    seconds = max(0, round(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    units = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    shown = [f"{n}{u}" for n, u in units if n][:2]
    return "".join(shown) or "0s"


def _due_ms(key: bytes) -> int:
    return struct.unpack(">Q", key[:8])[0]


def _waiting_reason(entry: FrontierEntry) -> str:
    """Why a queued URL that is not due yet waits, from what its frontier row carries."""
    if entry.deferrals:
        return "URLs deferred by domain budgets or host caps"
    if entry.reason.startswith("retry"):
        return "URLs backing off after errors"
    if entry.revisit is not None or entry.source == "revisit":
        return "revisits scheduled"
    return "URLs queued for later"


def _chunks(rows: Iterable[tuple[bytes, dict[str, bytes]]], size: int) -> Iterator[list[FrontierEntry] | None]:
    """The rows' entries, ``size`` at a time; None for a row that does not decode."""
    chunk: list[FrontierEntry] = []
    for _key, cells in rows:
        try:
            chunk.append(FrontierEntry.from_cells(cells))
        except (ValueError, TypeError, KeyError):
            yield None
            continue
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _holds(store: Store, cfg: CrawlConfig, hosts: list[str], now: float) -> dict[str, tuple[str | None, float | None]]:
    """For each host: why it gets no slots now (None if it would get some), and from when
    it would (None: not by itself). Two batched key-set reads, as Select does."""
    from beamcrawl.transforms.assign_slots import hold_reason, refusal_holding

    keys = [h.encode() for h in hosts]
    bare = {h: hostname_of(h) for h in hosts}
    records = store.read_keys("hosts", keys)
    policies = store.read_keys("policies", sorted(set(keys) | {b.encode() for b in bare.values()}))
    out: dict[str, tuple[str | None, float | None]] = {}
    for host, key in zip(hosts, keys):
        record = read_host(host, records.get(key))
        policy = HostPolicy.from_cells(host, policies.get(key) or policies.get(bare[host].encode()))
        reason = hold_reason(host, record, policy, cfg, now)
        until: float | None = None
        if reason == "paused" and policy is not None:
            until = policy.pause_until
        elif reason == "refused":
            # Until its recheck: the end of its back-off, or its robots.txt's next fetch.
            refusal = refusal_holding(record, cfg, now)
            if refusal is not None:
                until = refusal.until or record.robots_fetched_at + cfg.robots_max_age
        elif reason == "held" and record is not None:
            # Held while its next allowed request lies past the round's window.
            until = politeness.next_allowed(record.last_fetch_end, record.delay, record.not_before) - cfg.round_window
        out[host] = (reason, until)
    return out


def check_idle(store: Store, cfg: CrawlConfig, now: float) -> Idle | None:
    """None when a round now would have something to fetch; else what the wait is.

    Args:
        store: The crawl's store.
        cfg: The crawl's configuration (round window, blocklist).
        now: The time to judge "due" at (epoch seconds).
    """
    due_end = frontier_key(int(now * 1000) + 1, 0)
    idle = Idle(now=now, wake_at=None)
    wakes: list[float] = []
    seen: dict[str, tuple[str | None, float | None]] = {}
    scanned = 0
    for chunk in _chunks(store.read_range("frontier", b"", due_end), CHUNK):
        if chunk is None:
            return None  # a due row that does not decode: the round counts it and sets it aside
        fresh = sorted({e.host for e in chunk} - seen.keys())
        seen.update(_holds(store, cfg, fresh, now) if fresh else {})
        for entry in chunk:
            reason, until = seen[entry.host]
            if reason is None:
                return None  # a due URL on a host that may be fetched: run the round
            idle.waiting[f"due URLs {_HOLD_WORDS.get(reason, reason)}"] += 1
            if until is not None:
                wakes.append(until)
        scanned += len(chunk)
        if scanned >= MAX_DUE_SCAN:
            return None  # too many to judge cheaply here: the round sorts them out
    later = 0
    for key, cells in store.read_range("frontier", due_end, limit=SAMPLE):
        if later == 0:
            wakes.append(_due_ms(key) / 1000.0)
        later += 1
        try:
            idle.waiting[_waiting_reason(FrontierEntry.from_cells(cells))] += 1
        except (ValueError, TypeError, KeyError):
            idle.waiting["unreadable frontier rows"] += 1
    idle.sampled = later >= SAMPLE
    idle.wake_at = max(now, min(wakes)) if wakes else None
    return idle


def wait_until_due(
    store: Store,
    cfg: CrawlConfig,
    out: TextIO,
    *,
    exit_when_idle: bool = False,
    label: str = "",
    meanwhile: Callable[[], None] | None = None,
) -> bool:
    """Returns at once when a round has work; else says why not and waits until it has.

    Args:
        store: The crawl's store.
        cfg: The crawl's configuration.
        out: Where the one-line explanation goes.
        exit_when_idle: Return False instead of waiting (a scheduled run just ends).
        label: Put before the line (``round N: ``).
        meanwhile: Called before each slice of the wait (the crawl loop's charts catch up).

    Returns:
        True when a round should run now; False when the crawl should stop: nothing is
        queued, nothing will fall due by itself (every waiting host is blocked), or
        ``exit_when_idle``.
    """
    said: tuple | None = None
    while True:
        idle = check_idle(store, cfg, time.time())
        if idle is None:
            return True
        state = (idle.wake_at, sorted(idle.waiting.items()))
        if state != said:  # said once, and again only when something changed
            print(f"{label}{idle.message()}", file=out, flush=True)
            said = state
        if exit_when_idle or idle.wake_at is None:
            if exit_when_idle and idle.wake_at is not None:
                print(
                    f"{label}exiting (--exit-when-idle); run the crawl again after {_iso(idle.wake_at)}",
                    file=out,
                    flush=True,
                )
            return False
        if meanwhile is not None:
            meanwhile()
        # In slices: a Ctrl-C delivered to any thread raises KeyboardInterrupt here within 0.2 s.
        interruptible.sleep(min(max(idle.wake_at - time.time(), 0.0) + 0.05, RECHECK_SECONDS))
