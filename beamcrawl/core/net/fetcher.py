"""The polite asynchronous fetcher: one asyncio loop crawling many hosts at once.

Each host gets one coroutine, so a host never has two requests in flight; before every
request the coroutine waits until the host's next allowed time, counted on the real clock
from the end of the previous response on that host (carried across rounds in the host
record). With ``--ip-delay`` set, each server IP has a clock too: one request at a time per
IP, each starting at least that long after the previous response on the IP ended, whichever
host it was for (fetch shards are keyed by IP, so this loop owns every host on its IPs).
robots.txt is fetched first when the cached copy is missing, stale or unreachable, and every
URL is checked against the rules in force (the last good copy stands in for an unreachable
file after 24 h, see core/policy/robots.py) before it is requested.

Every response is bounded (docs/ARCHITECTURE.md §3, "Bounded work per input"): aiohttp's connect and
total timeouts, at most ``--max-response-headers`` header lines of at most 16 KiB each, and a
body read by :func:`transfer.read_body` up to ``--max-body-bytes`` at no less than
``--min-transfer-rate`` (a slow-drip server is cut, recorded as ``WARC-Truncated: time``),
its Content-Encoding then undone into at most ``--max-decoded-bytes`` (bombs).

The loop's clock measures the hosts, not the loop: large bodies are decoded and large
robots.txt files parsed on a worker thread, and the time the loop was late on other work
while a request was open (:class:`LoopLag`) is not charged to that host's adaptive delay.

The loop runs in a thread of its own (:class:`FetchRunner`) so that a Beam DoFn can hand it
host plans as they arrive and pass results downstream while other hosts are still being
crawled. Nothing here imports Beam.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import math
import queue
import re
import threading
import time
from dataclasses import replace
from typing import Any, AsyncIterator, Callable, Iterator, Protocol
from urllib.parse import urlsplit

import aiohttp

from beamcrawl.core.net import botauth
from beamcrawl.core.net.backlog import RESULT_OVERHEAD, Backlog, result_bytes
from beamcrawl.core.policy import politeness
from beamcrawl.core.net.conditional import conditional_headers
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.core.net.gate import AddressRefused, open_session
from beamcrawl.core.net.wire import client_headers, header_url, request_url
from beamcrawl.core.net.netpolicy import ResolveRules
from beamcrawl.core.net.resolver import REFUSED, FetchRefused, PolicyResolver, hostname_of
from beamcrawl.core.urls.hostkeys import blocklisted, shard_of
from beamcrawl.core.urls.urlnorm import host_of, normalize
from beamcrawl.core.policy import usage_prefs
from beamcrawl.core.policy.robots import MAX_ROBOTS_BYTES, RobotsRules, cached_rules, is_robots_txt, whole_lines
from beamcrawl.core.net.transfer import (
    ACCEPT_ENCODING,
    BadFraming,
    CappedDecoder,
    UnsupportedEncoding,
    decode_content,
    read_body,
    transfer_codings,
    warc_truncated,
)
from beamcrawl.schemas.due_rows import DueRows, EntryCursor, entries_of
from beamcrawl.schemas.records import FetchResult, FrontierEntry, HostPlan, HostRecord, evolve

log = logging.getLogger(__name__)

ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
# Longest response status or header line, and longest header value (aiohttp's own defaults
# are 8 KiB; real sites send cookies and CSP headers past that).
MAX_HEADER_LINE = 16 * 1024
# Characters of a Location kept as the URL of a redirect hop not followed (the header's value
# as it was: it is no URL).
MAX_UNFOLLOWED = 2048
# aiohttp >= 3.10 stops parsing past max_headers lines; older ones are checked after parsing.
_PARSER_COUNTS_HEADERS = "max_headers" in inspect.signature(aiohttp.ClientSession._request).parameters
# Seconds between the resolve stage's answers and the fetch loop's start (job set-up) that a
# stored answer may still be pinned through, on top of the round window.
PIN_SLACK = 600.0
# Seconds the draining thread sleeps when nothing is ready (FetchRunner.drain).
DRAIN_PAUSE = 0.05
# A refused address's reason starts so (as core/net/resolver.py and core/net/gate.py write it).
REFUSED_PREFIX = REFUSED
# The longest a host waits after DNS failures in a row.
DNS_BACKOFF_MAX = 86400.0
# When the transfer of the response this task is reading ended (monotonic, and the wall clock
# then) and the loop's lag then: set by HostCrawler._read_body, read by its callers.
_TRANSFER_END: contextvars.ContextVar[tuple[float, float, float] | None] = contextvars.ContextVar(
    "transfer_end", default=None
)
# What _fetch_robots returns when a redirect leads to a host another fetch loop owns.
ROUTED = object()
# Bodies past this many bytes are decoded, and robots.txt files parsed, on a worker thread:
# on the loop, a 50 MiB gzip sitemap held every other host's response for seconds, and that
# wait was timed as the other hosts' response times (issue #24).
OFF_LOOP_BYTES = 64 * 1024
# Raw bytes given to a decoder at a time.
DECODE_STEP = 64 * 1024
# The loop-lag probe's period, and the lateness of a timer that is ordinary (not lag).
LAG_TICK = 0.02
LAG_SLACK = 0.002


__all__ = [
    "FetchRefused",
    "FetchRunner",
    "HostCrawler",
    "PolicyResolver",
    "decode_body",
    "store_robots_answer",
]


class RequestGuard(Protocol):
    """What the loop asks before each request, once it is the host's turn (the fetch stage
    gives one that records the host's clock in the store and reads the round's fence,
    state/fence.py): the reason the request must not go out, or None to send it now."""

    async def before_request(self, record: HostRecord, shard: int, delay: float) -> str | None: ...

    # Optional: ``async def record_clock(self, record: HostRecord) -> None``, the host's clock
    # recorded after a robots.txt hop's answer (no host record of this loop may carry it), and
    # ``async def stored_clock(self, host: str) -> HostRecord | None``, the clock the store has
    # for a host a hop leads to that has no plan in the loop, and ``async def
    # stored_policy(self, host: str) -> HostPolicy | None``, the operator's policy for it.


class ResponseRefused(aiohttp.ClientError):
    """A response outside the limits (too many header lines): recorded as a fetch error."""


class _IpClock:
    """One server IP's turn: a FIFO lock (one request at a time) and its last response end,
    on the wall clock and, for this loop's own responses, on the monotonic one."""

    __slots__ = ("last_end", "lock", "mono_end")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.last_end = 0.0
        self.mono_end = -math.inf


class LoopLag:
    """How late the fetch loop runs: a probe that sleeps :data:`LAG_TICK` and sums how much
    later than that it wakes (beyond :data:`LAG_SLACK`).

    A response's time measured on the loop includes any time the loop (or the process's
    other threads, through the GIL) was busy elsewhere before it read the bytes. The lag
    summed over a request, :meth:`now` at its end minus :meth:`now` at its start, is taken
    off its elapsed time before that time drives the host's adaptive delay
    (:attr:`FetchResult.response_time`); the host's clock still counts from the real end.
    The discount can only shorten a response time by time the loop was provably busy, and
    the delay never falls below ``--min-delay`` or the host's Crawl-delay.
    """

    def __init__(self, tick: float = LAG_TICK, slack: float = LAG_SLACK) -> None:
        self.tick = tick
        self.slack = slack
        self.total = 0.0
        self._due = time.monotonic() + tick
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._due = time.monotonic() + self.tick
        self._task = asyncio.get_running_loop().create_task(self._probe())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _probe(self) -> None:
        while True:
            self._due = time.monotonic() + self.tick
            await asyncio.sleep(self.tick)
            self.total += max(0.0, time.monotonic() - self._due - self.slack)

    def now(self) -> float:
        """Seconds of lag so far, counting a probe that is overdue right now."""
        return self.total + max(0.0, time.monotonic() - self._due - self.slack)


def decode_body(raw: bytes, encoding: str | None, cap: int) -> tuple[bytes, bool]:
    """Undoes Content-Encoding with a cap on the decoded size (no decompression bombs).

    Returns the payload and whether the cap cut it. Unknown encodings and corrupt streams
    pass through as sent. (A wrapper of :func:`transfer.decode_content`.)
    """
    decoded = decode_content(raw, encoding, cap)
    return decoded.body, decoded.truncated


class HostCrawler:
    """Crawls the hosts of many plans in one event loop, emitting results as they come."""

    def __init__(
        self,
        cfg: CrawlConfig,
        emit: Callable[[str, Any], None],
        deadline: float,
        guard: RequestGuard | None = None,
        backlog: Backlog | None = None,
    ) -> None:
        self.cfg = cfg
        self.emit = emit
        self.deadline = deadline
        self.guard = guard
        # Results emitted and not yet parsed (core/net/backlog.py): no request goes out while
        # it is full. None: unbounded (a caller that keeps every result, like the tests').
        self.backlog = backlog
        # Shards whose round was fenced (the guard said stop), with the reason: they send
        # nothing more, and their hosts' remaining URLs go back to the frontier.
        self.fenced: dict[int, str] = {}
        self.resolver = PolicyResolver(ResolveRules(cfg.resolve), cfg.allow_private_networks, ttl=cfg.dns_ttl)
        self.session: aiohttp.ClientSession | None = None
        self._ip_clocks: dict[str, _IpClock] = {}
        # Per host slot: its live record (its clock), its turn, and its robots rules in force,
        # for the hosts this loop crawls and those robots.txt redirects lead to.
        self._clocks: dict[str, HostRecord] = {}
        self._turns: dict[str, asyncio.Lock] = {}
        # Per host slot: when this loop's last response from it ended, on the monotonic clock
        # (the wall clock can step; the gap the server sees must not shrink with it).
        self._mono_ends: dict[str, float] = {}
        self._rules: dict[tuple[str, str], RobotsRules] = {}
        # A page redirect's target → when its Retry-After ends (RFC 9110 §10.2.3): a target
        # this loop would fetch later in the round is left queued instead (the commit moves
        # its row to the hold). One loop's: a target another loop crawls is not seen here.
        self._redirect_holds: dict[str, float] = {}
        self.lag = LoopLag()
        self._slots = asyncio.Semaphore(cfg.max_hosts_in_flight)
        self._timeout = aiohttp.ClientTimeout(total=cfg.total_timeout, sock_connect=cfg.connect_timeout)
        # Web Bot Auth: every request signed (core/net/botauth.py); the key is read here, by the
        # fetch loop, so it never travels in the job's options or graph (from a key folder,
        # the newest key able to sign now: a rotation takes effect at the next round).
        self.signer = (
            botauth.load_signer(cfg.signing_key, cfg.signature_agent)
            if cfg.signing_key and cfg.signature_agent
            else None
        )
        # Running totals for live progress (hosts crawling now = started - finished, hosts
        # sleeping on their delay = waits started - finished): plain ints, bumped on the loop's
        # thread and read by the DoFn's, which publishes them as counters once a second.
        self.hosts_started = self.hosts_finished = 0
        self.waits_started = self.waits_finished = 0

    async def open(self) -> None:
        # Every connection passes the address policy at the connector (core/net/gate.py).
        self.session = open_session(
            self.resolver,
            self.cfg.allow_private_networks,
            limit=max(self.cfg.max_hosts_in_flight, 100),
            limit_per_host=2,
            # No cache of the connector's own: every connection asks the resolver, whose
            # answer for a host is the one pinned or judged for it (a cached answer outlived
            # a pin, and a host's requests went to another address than its clock's).
            use_dns_cache=False,
        )
        self.lag.start()

    async def close(self) -> None:
        self.lag.stop()
        if self.session is not None:
            await self.session.close()
        await self.resolver.close()

    # --- one host ---------------------------------------------------------------------

    async def crawl(self, plan: HostPlan) -> None:
        live = self._own_clock(plan)  # before queueing for a slot: hops may need its clock
        async with self._slots:
            self.hosts_started += 1
            todo = EntryCursor(plan.entries)
            try:
                record = await self._crawl_host(plan, live, todo)
            except Exception as exc:  # never lose a host's work to a bug in one request
                log.exception("host %s failed", plan.host)
                self.emit("failed", (plan, exc))  # a dead letter of the fetch stage
                # The URLs with no result yet go back (the one taken last had none: its
                # result is emitted last), not the whole plan, whose answered URLs would
                # have a second result; and the plan's record goes out with the live clock,
                # this round's requests and the server's holds on it, which the next round
                # counts its gaps from.
                self._defer(todo.rest(with_last=True), f"internal error: {exc!r}")
                record = _with_clock(plan.record, live)
            finally:
                self.hosts_finished += 1
            self.emit("host", record)

    def _defer(self, entries: DueRows | list[FrontierEntry], why: str) -> None:
        """Gives ``entries`` back to the frontier untouched, one deferred result each, emitted
        as one ``("deferred", (entries, why))`` item: :meth:`FetchRunner.drain` makes each
        entry's result only as it is taken. When the window ends, every host's unreached
        entries are deferred at once (hundreds of thousands in a deep frontier's round), and
        a result each, made here, would wait in the backlog all together; a host that had
        not started gives its rows back as they came (:class:`DueRows`), never decoded."""
        self.emit("deferred", (entries, why))

    def _own_clock(self, plan: HostPlan) -> HostRecord:
        """The host's live record (its clock) for this loop, registered by its slot so that a
        redirect hop from another host waits on it too; a clock that hops already started
        for the host is merged in."""
        record = replace(plan.record)
        record.robots_other = dict(record.robots_other)  # select_robots rewrites it: the plan's stays
        started = self._clocks.get(plan.host)
        if started is not None:
            record.last_fetch_end = max(record.last_fetch_end, started.last_fetch_end)
            record.not_before = max(record.not_before, started.not_before)
            record.delay = max(record.delay, started.delay)
        self._clocks[plan.host] = record
        return record

    async def _crawl_host(self, plan: HostPlan, record: HostRecord, todo: EntryCursor) -> HostRecord:
        """Crawls one host's plan; ``todo`` takes its URLs in order, each decoded when its
        turn comes (a host crawls for the whole window, and a loop holds a thousand)."""
        delay = plan.delay
        for entry in EntryCursor(plan.disallowed):
            self.emit("result", _not_fetched(entry, "robots_disallowed"))
        if not len(todo) and not plan.fetch_robots:
            return record
        schemes = plan.schemes or list(dict.fromkeys(_scheme(e.url) for e in entries_of([plan.entries], [])))
        to_fetch = list(plan.robots_schemes) or ([schemes[0] if schemes else "http"] if plan.fetch_robots else [])
        host_only = hostname_of(plan.host)
        # The resolve stage's answer is the address this host's fetch shard was chosen by, so
        # requests must go there for the per-IP clock to hold: it is kept for the whole round
        # even if its TTL lapses meanwhile (the stage refreshed anything expired at the start).
        if record.resolution_fresh(time.time() - self.cfg.round_window - PIN_SLACK):
            self.resolver.pin(
                host_only,
                record.ip,
                record.dns_error,
                record.resolved_at,
                max(record.dns_ttl, self.deadline - record.resolved_at),
            )
        answer = await self.resolver.resolution(host_only)
        self.resolver.hold(host_only, self.deadline)  # the address judged is the one connected to
        record.ip, record.dns_error = answer.ip, answer.error
        record.resolved_at, record.dns_ttl = answer.resolved_at, answer.ttl
        if answer.error is not None:
            if is_refusal(answer.error):  # the address policy: recorded, never retried
                for entry in todo:
                    self.emit("result", _refused(entry, entry.url, answer.error))
            else:  # DNS trouble passes: the URLs wait, the host backs off
                hold_after_dns_failure(record, time.time())
                self._defer(todo.rest(), answer.error)
            return record
        record.dns_failures = 0
        self._book_ip(record.ip, record.last_fetch_end)  # the IP's clock, carried across rounds

        # robots.txt per scheme (RFC 9309 §2.3): each scheme's answer is looked up, or fetched
        # first when the plan says so, and every URL is checked against its own scheme's.
        by_scheme: dict[str, RobotsRules | None] = {}
        for scheme in to_fetch:
            record.select_robots(scheme)
            # Never sleep past the window: a host held by Retry-After or back-off beyond it
            # gives its URLs back to the frontier untouched.
            fetched = (
                await self._fetch_robots(plan, record, scheme) if self._may_start(record, delay, plan.shard) else None
            )
            if not isinstance(fetched, RobotsRules):
                why = (
                    self._why_stopped(plan.shard)
                    if fetched is None
                    else f"robots.txt unknown: redirected to {record.robots_via}"
                )
                self._defer(todo.rest(), why)
                return record
            by_scheme[scheme] = fetched
        for scheme in schemes:
            if scheme not in by_scheme:
                record.select_robots(scheme)
                by_scheme[scheme] = cached_rules(
                    record.robots,
                    record.robots_good,
                    good_at=record.robots_good_at,
                    failing_since=record.robots_failing_since,
                    token=self.cfg.robots_token,
                    now=time.time(),
                )
        for scheme, known in by_scheme.items():  # what a redirect hop to this host is checked by
            if known is not None:
                self._rules[(plan.host, scheme)] = known
        crawl_delays = [r.crawl_delay() for r in by_scheme.values() if r is not None]
        delay = max(
            delay, politeness.base_delay(self.cfg, max((d for d in crawl_delays if d is not None), default=None), 0.0)
        )
        record.delay = max(record.delay, delay)

        # Usage preferences (core/policy/usage_prefs.py), read only for a crawl with purposes.
        usage: dict[str, usage_prefs.UsageRules] = {}
        for scheme, known in by_scheme.items() if self.cfg.purposes else ():
            if known is not None and len(known.text or "") > OFF_LOOP_BYTES:  # a large file reads off the loop
                usage[scheme] = await asyncio.to_thread(usage_prefs.UsageRules.from_robots, known)
            else:
                usage[scheme] = usage_prefs.UsageRules.from_robots(known)
        for entry in todo:
            rules = by_scheme.get(_scheme(entry.url))
            if rules is None:  # robots unknown and not fetched: never fetch blind
                self.emit("result", _deferred(entry, "robots.txt unknown"))
                continue
            if rules.kind == "disallow_all":
                # 5xx or unreachable robots.txt: fetch nothing, try again in a later round.
                self.emit("result", _deferred(entry, "robots.txt unavailable"))
                continue
            before = rules.checks_capped
            if not rules.allowed(entry.url):
                refused = _not_fetched(entry, "robots_disallowed")
                if rules.checks_capped > before:  # the polite answer of a check past its bound
                    refused.error = ROBOTS_CAPPED
                self.emit("result", refused)
                continue
            site_usage = usage.get(_scheme(entry.url))
            if site_usage is not None:
                decided = usage_prefs.decide(site_usage, entry.url, self.cfg.purposes)
                refusal = usage_prefs.crawl_refusal(decided)
                if refusal is not None:  # the site refuses a purpose of the crawl: no request
                    self.emit(
                        "result",
                        replace(
                            _not_fetched(entry, "usage_refused"),
                            error=refusal[:300],
                            usage=usage_prefs.record_of(decided),
                            usage_refused=refusal[:300],
                        ),
                    )
                    continue
            if self._redirect_held(entry, entry.url):
                # A redirect this round answered asked to wait before this URL is requested.
                self.emit("result", _deferred(entry, REDIRECT_HELD))
                continue
            result = None
            if self._may_start(record, record.delay, plan.shard):
                result = await self._request(record, entry, entry.url, record.ip, record.delay, plan.shard)
            if result is not None and result.outcome == "deferred":  # held while it waited its turn
                self.emit("result", result)
                continue
            if result is None:
                self._defer(todo.rest(with_last=True), self._why_stopped(plan.shard))
                break
            self._after(record, result, rules, plan.delay)
            self._note_redirect_hold(result)
            if site_usage is not None:
                result = apply_usage(result, site_usage, self.cfg.purposes)
            self.emit("result", result)
        return record

    def _redirect_held(self, entry: FrontierEntry, url: str) -> bool:
        """Whether a page redirect this loop saw asked to wait before ``url`` (a page's own URL,
        not a robots.txt hop) is requested."""
        return entry.source != "robots" and url == entry.url and self._redirect_holds.get(url, 0.0) > time.time()

    def _note_redirect_hold(self, result: FetchResult) -> None:
        """Notes a page redirect's target as held until the redirect's Retry-After ends."""
        if result.outcome != "fetched" or not 300 <= (result.status or 0) < 400:
            return
        location = result.header("location")
        hold = politeness.redirect_hold(result.status, result.header("retry-after"), result.fetched_at + result.elapsed)
        if not location or hold <= 0:
            return
        try:
            target = normalize(header_url(location), result.url)  # as the parse stage names it
        except ValueError:  # no URL: nothing will be queued for it either
            return
        self._redirect_holds[target] = max(hold, self._redirect_holds.get(target, 0.0))

    def _may_start(self, record: HostRecord, delay: float, shard: int) -> bool:
        """Whether the host's next turn comes before the round window ends (and its shard's
        round was not fenced)."""
        if shard in self.fenced:
            return False
        return politeness.next_allowed(record.last_fetch_end, delay, record.not_before) < self.deadline

    def _why_stopped(self, shard: int) -> str:
        """Why a host of ``shard`` got no further request: the window, or the fence."""
        fenced = self.fenced.get(shard)
        return "round window ended" if fenced is None else f"round fenced: {fenced}"

    async def _request(
        self, record: HostRecord, entry: FrontierEntry, url: str, ip: str | None, delay: float, shard: int
    ) -> FetchResult | None:
        """Waits for room in the backlog of unparsed results (when the loop has one), then for
        the host's turn, then the server IP's, then GETs ``url``.

        Returns None, without a request, when the round window ended while waiting, or when
        the guard refused it (the shard is then fenced: see :attr:`fenced`); a deferred result,
        without a request, for a page a redirect answered meanwhile asked to wait for. The guard is
        asked last, once it is the host's turn, so that the clock it records is the one the
        request goes out on.
        """
        # One request in flight per host, whoever asks: the host's own URLs and redirect hops
        # from other hosts take turns on its lock.
        async with self._turns.setdefault(record.host, asyncio.Lock()):
            if self.backlog is not None:  # not while the stage is behind: a wait, never a gap cut short
                await self.backlog.room()
            waited = 0.0
            while True:
                live = self._clocks.get(record.host, record)
                if live is not record:
                    # A redirect hop that started on the host's clock before the host's own
                    # plan came (_own_clock), or whose plan came while it waited: it waits on
                    # the record in use now, which has the requests booked since and the
                    # plan's delay (its Crawl-delay), never less than its own.
                    record, delay = live, max(delay, live.delay)
                waited += await self._wait_turn(record, delay)
                if self._clocks.get(record.host, record) is record:
                    break
            async with self._ip_turn(record.ip) as ip_waited:
                if time.time() >= self.deadline or shard in self.fenced:
                    return None
                if self._redirect_held(entry, url):  # a redirect answered while this one waited
                    return _deferred(entry, REDIRECT_HELD)
                if self.guard is not None:
                    refused = await self.guard.before_request(record, shard, delay)
                    if refused is not None:
                        if shard not in self.fenced:
                            log.warning("fetch shard %d stops: %s", shard, refused)
                        self.fenced[shard] = refused
                        return None
                    if time.time() >= self.deadline:  # the window ended while the clock was written
                        return None
                _TRANSFER_END.set(None)
                result = await self._get(entry, url, ip)
                transfer = _TRANSFER_END.get()
                ended = transfer[0] if transfer is not None else time.monotonic()
                self._mono_ends[record.host] = max(self._mono_ends.get(record.host, -math.inf), ended)
            if record is not self._clocks.get(record.host, record):  # the host's plan came meanwhile
                self._clocks[record.host].last_fetch_end = max(
                    self._clocks[record.host].last_fetch_end, result.fetched_at + result.elapsed
                )
        result.waited = waited + ip_waited
        return result

    async def _hop_clock(
        self, plan: HostPlan, target: str, url: str, entry: FrontierEntry
    ) -> HostRecord | str | FetchResult:
        """The clock of ``target``, another host a robots.txt redirect of ``plan.host`` leads to.

        Returns the target's live record when this loop owns the target (its fetch shard is
        this plan's: the loop keeps its clock), ``"elsewhere"`` when it does not (another loop
        may be fetching it now), ``"forbidden"`` when the target's robots.txt forbids the hop
        (or is not known here and the hop is not to ``/robots.txt``) or ``--blocklist`` names
        the target, or the operator blocked or paused it, and the refused result
        when the address policy refuses the target: no request is made, so no clock is needed.
        """
        if self.cfg.blocklist and blocklisted(target, self.cfg.blocklist):
            return "forbidden"  # --blocklist: the host gets no fetches, hops included
        answer = await self.resolver.resolution(hostname_of(target))
        self.resolver.hold(hostname_of(target), self.deadline)  # the hop goes where it was judged to
        if answer.error is not None and is_refusal(answer.error):
            return _refused(entry, url, answer.error)
        # The target's fetch shard, as the plans are keyed (transforms/assign_slots.py): by its
        # address with --ip-delay (that address's clock is its shard's; this host's address is
        # the one this plan was keyed by), else by its name. A target on another address whose
        # shard is this plan's is this loop's too: only this host's address counted, and a hop
        # to any other was never made.
        by_ip = self.cfg.ip_delay > 0 and answer.ip is not None and answer.error is None
        same_ip = by_ip and answer.ip == plan.record.ip
        if not same_ip and shard_of(f"ip:{answer.ip}" if by_ip else target, self.cfg.fetch_shards) != plan.shard:
            return "elsewhere"
        if not is_robots_txt(url):  # /robots.txt is always allowed (RFC 9309 §2.2.2)
            rules = self._rules.get((target, urlsplit(url).scheme))
            if rules is None or rules.kind == "disallow_all" or not rules.allowed(url):
                return "forbidden"
        clock = self._clocks.get(target)
        if clock is None:  # a host with no plan in this loop: its clock starts here
            # The operator's word on it, which the planner alone read: a blocked or paused
            # host (none of its own URLs is planned) got the hop at once, and one with a
            # minimum delay got it at --min-delay.
            policy_of = getattr(self.guard, "stored_policy", None)
            policy = await policy_of(target) if policy_of is not None else None
            if policy is not None and (policy.blocked or (policy.pause_until or 0) > time.time()):
                return "forbidden"
            # From the clock the store has for it (its last request, delay and holds from an
            # earlier round): started afresh, a hop went at once to a host whose Crawl-delay
            # had not passed since its last request, or that a Retry-After held for an hour.
            loader = getattr(self.guard, "stored_clock", None)
            stored = await loader(target) if loader is not None else None
            # On the target's address: the hop takes that address's turn (--ip-delay).
            fresh = HostRecord(host=target, delay=self.cfg.min_delay, ip=answer.ip)
            clock = self._clocks.setdefault(target, fresh)  # another hop's or its plan's, if one came meanwhile
            if policy is not None and policy.min_delay_ms:
                clock.delay = max(clock.delay, policy.min_delay_ms / 1000.0)  # never lowered after
            if stored is not None:
                clock.last_fetch_end = max(clock.last_fetch_end, stored.last_fetch_end)
                clock.not_before = max(clock.not_before, stored.not_before)
                clock.delay = max(clock.delay, stored.delay)
                # And its errors in a row: a hop answered with a 5xx every round counts toward
                # the back-off as a planned host's requests do.
                clock.consecutive_errors = max(clock.consecutive_errors, stored.consecutive_errors)
                if clock is fresh:
                    self._book_ip(answer.ip, stored.last_fetch_end)
        return clock

    def _book_ip(self, ip: str | None, end: float) -> None:
        """Moves an IP's clock forward to a response end known from a host record."""
        if ip is not None and self.cfg.ip_delay > 0 and end > 0:
            clock = self._ip_clocks.setdefault(ip, _IpClock())
            clock.last_end = max(clock.last_end, end)

    @contextlib.asynccontextmanager
    async def _ip_turn(self, ip: str | None) -> AsyncIterator[float]:
        """Holds the server IP's turn around one request; yields the seconds waited for it.

        One request at a time per IP, each starting at least ``--ip-delay`` after the previous
        response on that IP ended, counted on the real clock like the host's gap. A no-op when
        ``--ip-delay`` is 0 or the address is unknown.
        """
        gap = self.cfg.ip_delay
        if gap <= 0 or ip is None:
            yield 0.0
            return
        clock = self._ip_clocks.setdefault(ip, _IpClock())
        began = time.monotonic()
        async with clock.lock:  # FIFO: hosts sharing the IP take turns in arrival order
            while (
                wait := max(
                    clock.last_end + gap + politeness.SAFETY_MARGIN - time.time(),
                    clock.mono_end + gap + politeness.SAFETY_MARGIN - time.monotonic(),
                )
            ) > 0:
                await asyncio.sleep(wait)
            try:
                yield time.monotonic() - began
            finally:
                clock.last_end = max(clock.last_end, time.time())
                clock.mono_end = time.monotonic()

    async def _wait_turn(self, record: HostRecord, delay: float) -> float:
        """Sleeps until the host may be asked again (real clock, from the last response end);
        returns the seconds slept, for the politeness-wait metric."""
        began = time.monotonic()
        gap = self._turn_gap(record, delay)
        if gap <= 0:
            return 0.0
        self.waits_started += 1
        try:
            while gap > 0:
                await asyncio.sleep(gap)
                gap = self._turn_gap(record, delay)
        finally:
            self.waits_finished += 1
        return time.monotonic() - began

    async def _wait_until(self, at: float) -> None:
        """Sleeps until the epoch second ``at`` (a politeness wait), counted on the monotonic
        clock from now, so that a step of the wall clock cannot shorten it."""
        left = at - time.time()
        if left <= 0:
            return
        until = time.monotonic() + left
        self.waits_started += 1
        try:
            while (left := until - time.monotonic()) > 0:
                await asyncio.sleep(left)
        finally:
            self.waits_finished += 1

    def _turn_gap(self, record: HostRecord, delay: float) -> float:
        """Seconds until the host's turn: on the wall clock from its booked end (which also
        carries earlier rounds' and other loops' requests, and Retry-After holds), and on the
        monotonic clock from this loop's own last response to it, so that a step of the wall
        clock during the wait cannot shorten the gap the server sees."""
        wall = politeness.next_allowed(record.last_fetch_end, delay, record.not_before) - time.time()
        mono = self._mono_ends.get(record.host, -math.inf) + delay + politeness.SAFETY_MARGIN - time.monotonic()
        return max(wall, mono)

    def _after(self, record: HostRecord, result: FetchResult, rules: RobotsRules | None, floor: float) -> None:
        """Books a response on the host's clock and adapts its delay (never below ``floor``,
        the plan's delay, which carries the operator's minimum)."""
        end = result.fetched_at + result.elapsed
        record.last_fetch_end = max(record.last_fetch_end, end)
        record.fetches += 1
        status = result.status if result.outcome == "fetched" else None
        if status is not None:
            record.last_response_time = result.response_time  # the host's time, not the loop's
        steady = politeness.base_delay(self.cfg, rules.crawl_delay() if rules else None, record.last_response_time)
        decision = politeness.after_response(
            self.cfg,
            current_delay=max(record.delay, steady),
            steady_delay=steady,
            status=status,
            retry_after=result.header("retry-after"),
            end=end,
            consecutive_errors=record.consecutive_errors,
        )
        record.delay = max(decision.delay, floor)
        record.not_before = max(record.not_before, decision.not_before)
        record.consecutive_errors = decision.consecutive_errors

    async def _fetch_robots(self, plan: HostPlan, record: HostRecord, scheme: str) -> RobotsRules | None | object:
        """Fetches robots.txt (following up to max_redirects), caches the answer in the record
        and returns the rules in force; None when the round window ended before an answer,
        :data:`ROUTED` when the first other host the redirects lead to (``robots_via``) is one
        another loop owns: a later round plans the fetch in its shard. A hop that no round can
        make (a later host of the chain in another shard than that first one, or an address of
        another shard with ``--ip-delay``) counts the file unreachable.

        A hop to another host waits for that host's turn (one request in flight, its delay)
        and for the Retry-After of the redirect that named it (RFC 9110 §10.2.3), and books
        its response on that host's clock; a hop its robots.txt forbids is not
        made, and the file counts as unreachable. So does a 2xx cut short by a slow transfer,
        or whose Content-Encoding (or transfer coding) cannot be undone: what arrived is not
        the file to read rules from."""
        token = self.cfg.robots_token
        url = f"{scheme}://{plan.host}/robots.txt"
        # The file's rules are this origin's wherever its hops lead, and so is what its
        # Sitemap: lines vouch for (the entry keeps it through every hop).
        entry = FrontierEntry(
            url=url, fp=0, host=plan.host, due_ms=0, source="robots", robots_origin=f"{scheme}://{plan.host}"
        )
        status: int | None = None
        body: bytes | None = None
        foreign = ""  # the first host other than this one the hops lead to
        redirect_at = 0.0  # a redirect's Retry-After: no hop before this (epoch seconds)
        for hop in range(self.cfg.max_redirects + 1):
            # Every hop is a request to its own host, on that host's clock.
            clock: HostRecord | str | FetchResult = record
            floor = wait = plan.delay
            if hop > 0:
                target = host_of(url)  # a normalised URL's (a Location that is none ends the hops below)
                if target != plan.host:
                    if not foreign:
                        # The host the next fetch is planned by (in its shard, without --ip-delay).
                        foreign = record.robots_via = target
                    clock = await self._hop_clock(plan, target, url, entry)
                    if isinstance(clock, FetchResult):  # refused by the address policy
                        self.emit("result", clock)
                        status, body = None, None
                        break
                    if clock == "elsewhere":
                        if target == foreign and self.cfg.ip_delay <= 0:
                            # Not this loop's host: its own loop may be fetching it now. The
                            # answer waits for a later round that plans this host in the
                            # target's shard.
                            return ROUTED
                        # No round can make this hop: its host is in another shard than the
                        # first host the hops led to, which the fetch is planned by (routed to
                        # this one, it routed back: b.test's shard to c.test's and back, for
                        # ever), or the plan's shard is its address's (--ip-delay). The file
                        # counts as unreachable, asked again later on that schedule.
                        status, body = None, None
                        break
                    if isinstance(clock, str):
                        status, body = None, None  # the hop is forbidden: no answer (unreachable)
                        break
                    # The target's delay, not this host's; and its answer books the hop without
                    # the target's rules (its Crawl-delay) in hand, so it may raise that delay
                    # but never lower it: a good answer halved it, and the next hop to the
                    # target went at --min-delay under its Crawl-delay.
                    floor = wait = max(self.cfg.min_delay, clock.delay)
            assert isinstance(clock, HostRecord)
            if hop > 0 and (redirect_at >= self.deadline or not self._may_start(clock, wait, plan.shard)):
                # The hop's host is held (Retry-After, back-off) past the window, or the redirect
                # asked for a wait past it: no answer this round, rather than a sleep through
                # the hold with this host's slot.
                return None
            if redirect_at > 0:
                await self._wait_until(redirect_at)
            result = await self._request(clock, entry, url, clock.ip if hop == 0 else None, wait, plan.shard)
            if result is None:
                return None  # no answer this round: the cached state stays as it was
            if clock is not record:
                # The target's own plan may have come while the hop was in flight: its record
                # is the target's clock now (_own_clock), and the answer (a Retry-After hold, a
                # slow-down) is booked there, not on the clock the hop started on.
                clock = self._clocks.get(clock.host, clock)
                floor = max(floor, clock.delay)
            self._after(clock, result, None, floor)
            if clock is not record:
                # The target's clock goes to the store now: a host with no plan here has no
                # record this loop writes (its plan's may be written already), and the
                # clock written before the hop holds no answer. A Retry-After answered to
                # the hop lived only in this loop, and the next round asked the host early.
                recorder = getattr(self.guard, "record_clock", None)
                if recorder is not None:
                    await recorder(clock)
            self.emit("result", result)
            if result.outcome != "fetched":
                status, body = None, None
                break
            status, body = result.status, result.body
            if result.truncated == "length" or len(body) >= self._caps(False, True)[1]:
                # Cut at a cap (the transfer's, or the decoded bytes'): whole lines only. A
                # half line could make a long Allow a short one, which allows more.
                body = whole_lines(body)
            if 200 <= status < 300 and (result.truncated not in (None, "length") or await self._unreadable(result)):
                # Not the file: one cut short by a slow transfer (its rules up to the cut were
                # read, a Disallow still to come went unread), or one whose codings could not
                # be undone (read as the bytes sent, it held no rule); its host was crawled as
                # if they allowed everything. It counts as unreachable (RFC 9309 §2.3.1.4),
                # its rules asked for again later. A file cut at the body cap is its first
                # bytes, which §2.5 allows to be all that is parsed.
                status, body = None, None
                break
            location = result.header("location")
            if status in (301, 302, 303, 307, 308) and location:
                # Its Retry-After is the wait before the redirected request (RFC 9110
                # §10.2.3), which was made on the target's clock alone.
                redirect_at = politeness.redirect_hold(
                    status, result.header("retry-after"), result.fetched_at + result.elapsed
                )
                try:
                    # The hop goes out as any crawled URL does, normalised: its target is then
                    # sent as held and named so in its WARC records (core/net/wire.py); the
                    # Location's bytes read as UTF-8 when they are (wire.header_url).
                    url = normalize(header_url(location), url)
                except ValueError as exc:  # a Location no URL parser takes: no request for it
                    lost = replace(entry, url=location[:MAX_UNFOLLOWED])  # as given: it does not resolve
                    self.emit("result", _unfollowed(lost, f"redirect not followed: {type(exc).__name__}: {exc}"))
                    status, body = None, None
                    break
                entry = replace(entry, url=url)
                continue
            break
        else:
            status, body = 404, None  # too many redirects: RFC 9309 treats it as unavailable (4xx)
        if status is not None and 300 <= status < 400:
            status = 404
        if body is not None and len(body) > OFF_LOOP_BYTES:  # a large file parses off the loop
            rules = await asyncio.to_thread(RobotsRules.from_fetch, status, body, token)
        else:
            rules = RobotsRules.from_fetch(status, body, token)
        now = time.time()
        store_robots_answer(record, rules, status, now)
        return cached_rules(
            record.robots,
            record.robots_good,
            good_at=record.robots_good_at,
            failing_since=record.robots_failing_since,
            token=token,
            now=now,
        )

    def _caps(self, sitemap: bool, robots: bool) -> tuple[int, int]:
        """The bytes a body is read to, as transferred and as decoded (:meth:`_read_body`)."""
        cfg = self.cfg
        if sitemap:
            return max(cfg.max_body_bytes, cfg.max_sitemap_bytes), max(cfg.max_decoded_bytes, cfg.max_sitemap_bytes)
        if robots:  # RFC 9309 §2.5: at least 500 KiB parsed, and a byte to see where its line ends
            return max(cfg.max_body_bytes, MAX_ROBOTS_BYTES + 1), max(cfg.max_decoded_bytes, MAX_ROBOTS_BYTES + 1)
        return cfg.max_body_bytes, cfg.max_decoded_bytes

    async def _unreadable(self, result: FetchResult) -> bool:
        """Whether a fetched robots.txt's body is no text to read rules from: its codings
        could not be undone (a coding not supported, a corrupt stream), so that
        :meth:`_read_body` gave the bytes as sent as its payload, and those bytes are no
        text either (a compressed stream). A text file under a coding label it does not
        need (``Content-Encoding: utf-8``, a misconfiguration seen on the web) is read."""
        # Its transfer codings were undone already (raw_body is the entity, :meth:`_read_body`).
        codings = ", ".join(v for k, v in result.response_headers if k.lower() == "content-encoding")
        if not _codings_named(codings):
            return False
        raw, cap = result.raw_body, self.cfg.max_decoded_bytes
        if len(raw) > OFF_LOOP_BYTES:
            decoded = await asyncio.to_thread(decode_content, raw, codings, cap)
        else:
            decoded = decode_content(raw, codings, cap)
        return decoded.error is not None and not _is_text(raw)

    async def _get(self, entry: FrontierEntry, url: str, ip: str | None) -> FetchResult:
        """One GET, no redirects followed, body capped; never raises for network trouble."""
        assert self.session is not None
        request_headers = [
            ("User-Agent", self.cfg.user_agent),
            ("Accept", ACCEPT),
            ("Accept-Encoding", ACCEPT_ENCODING),
        ]
        if entry.revisit:
            # A page fetched before: ask only for a changed copy (a 304 transfers no body).
            request_headers += conditional_headers(entry.revisit.get("etag"), entry.revisit.get("last_modified"))
        if self.signer is not None:
            # Signed per request, created now: robots.txt, redirect hops, pages and sitemaps alike.
            request_headers += self.signer.headers(url)
        # ``fetched_at`` is the start on the clock the end is read on: the wall clock's reading
        # at the end less the monotonic duration. Taken as the wall clock's reading before the
        # request, a step of that clock meanwhile (an NTP step, a VM paused and resumed) put
        # the booked end seconds before the real one, and the host's next request that much
        # too soon (seen on a loaded machine: 0.23 s after a response for a 0.3 s delay).
        started = time.time()
        t0 = time.monotonic()
        lag0 = self.lag.now()
        limits: dict[str, int] = {"max_line_size": MAX_HEADER_LINE, "max_field_size": MAX_HEADER_LINE}
        if _PARSER_COUNTS_HEADERS:
            limits["max_headers"] = self.cfg.max_response_headers
        try:
            async with self.session.get(
                request_url(url),  # the target as held: not re-quoted by the client (core/net/wire.py)
                headers=client_headers(request_headers),  # their bytes as held (core/net/wire.py)
                allow_redirects=False,
                timeout=self._timeout,
                **limits,
            ) as resp:
                if len(resp.raw_headers) > self.cfg.max_response_headers:
                    resp.close()
                    raise ResponseRefused(f"more than {self.cfg.max_response_headers} response header lines")
                peer = (
                    resp.connection.transport.get_extra_info("peername")
                    if resp.connection and resp.connection.transport
                    else None
                )
                _TRANSFER_END.set(None)
                raw, body, cut = await self._read_body(
                    resp, sitemap=entry.kind != "page", robots=entry.source == "robots"
                )
                headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers]
                # The response ended with its last byte: decoding it afterwards is our time.
                ended, ended_wall, lag_then = _TRANSFER_END.get() or (time.monotonic(), time.time(), self.lag.now())
                elapsed = ended - t0
                lag = min(elapsed, lag_then - lag0)
                return FetchResult(
                    entry=entry,
                    outcome="fetched",
                    url=url,
                    final_url=str(resp.url),
                    status=resp.status,
                    fetched_at=ended_wall - elapsed,
                    elapsed=elapsed,
                    ip=(peer[0] if peer else ip),
                    http_version=f"{resp.version.major}.{resp.version.minor}" if resp.version else "1.1",
                    reason=resp.reason or "",
                    request_headers=request_headers,
                    response_headers=headers,
                    raw_body=raw,
                    body=body,
                    truncated=warc_truncated(cut),
                    loop_lag=lag,
                )
        except AddressRefused as exc:  # the gate refused it: no socket was opened
            return _refused(entry, url, exc.reason, request_headers, started)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
            elapsed = time.monotonic() - t0
            reason = type(exc).__name__ + (f": {exc}" if str(exc) else "")
            return FetchResult(
                entry=entry,
                outcome="error",
                url=url,
                fetched_at=time.time() - elapsed,
                elapsed=elapsed,
                ip=ip,
                request_headers=request_headers,
                error=reason[:500],
            )

    async def _read_body(
        self, resp: aiohttp.ClientResponse, sitemap: bool = False, robots: bool = False
    ) -> tuple[bytes, bytes, str | None]:
        """Reads the body within the transfer limits, undoes its transfer codings (the client
        undoes ``chunked`` only) and then its Content-Encoding.

        Returns ``(entity, payload, cut)``: the message's content, the transfer codings
        undone and the content codings kept (for the WARC record, whose head keeps
        Content-Encoding and renames Transfer-Encoding: WARC 1.1 §5.9 has the payload of an
        application/http block be its entity-body, and the record's head says of it what is
        true), the decoded payload (for parsing), and why the *transfer* was cut
        (``"length"``, ``"slow"``) or None. A payload cut by ``max_decoded_bytes`` alone is
        no cut of the record: the raw bytes go on being read (the decoder then idles) up to
        the body cap, so ``WARC-Truncated`` says ``length`` only when the recorded bytes are
        incomplete. The entity is capped at the body cap too: a transfer coding that expands
        past it is cut there (``"length"``).

        A sitemap or feed (``sitemap``) may be larger than a page: up to
        ``max_sitemap_bytes``, transferred and decoded. A robots.txt (``robots``) is read to
        at least :data:`~beamcrawl.core.policy.robots.MAX_ROBOTS_BYTES` and a byte, whatever
        the caps: RFC 9309 §2.5 has crawlers parse at least that much of it (:meth:`_caps`).

        The monotonic and wall times the transfer ended and the loop's lag then
        (:meth:`LoopLag.now`) are left in :data:`_TRANSFER_END` for the callers: the
        response's end, before decoding.

        Raises:
            ResponseRefused: A transfer coding that cannot be undone (one not supported, a
                corrupt stream or one that stops short, a ``chunked`` the client left in
                the body as it was not the last coding,
                :func:`~beamcrawl.core.net.transfer.transfer_codings`): the message has no
                content to record or read, only bytes no header of the record would
                describe.
        """
        cfg = self.cfg
        body_cap, decoded_cap = self._caps(sitemap, robots)
        # Every Content-Encoding field line: one list, as if comma-joined (RFC 9110 §5.3); the
        # first alone left a stack sent over two lines (gzip, then deflate) undecoded.
        content_encoding = ", ".join(resp.headers.getall("Content-Encoding", ()))
        # A 1xx, 204 or 304 has no content (RFC 9112 §6.3): its Transfer-Encoding frames nothing.
        framed = not (resp.status in (204, 304) or 100 <= resp.status < 200)
        try:
            transfer = transfer_codings(resp.headers.getall("Transfer-Encoding", ()) if framed else ())
            unframe: CappedDecoder | None = CappedDecoder(transfer, body_cap) if _codings_named(transfer) else None
        except (BadFraming, UnsupportedEncoding) as exc:
            resp.close()
            raise ResponseRefused(f"the transfer coding cannot be undone: {exc}") from None
        try:
            decoder: CappedDecoder | None = CappedDecoder(content_encoding, decoded_cap)
        except UnsupportedEncoding:
            decoder = None  # kept as sent (a sniffer then sees compressed bytes, not HTML)
        if decoder is not None and decoder.stages == 0:
            decoder = None  # identity: the payload is the raw body
        raw, cut = await read_body(
            resp.content,
            body_cap,
            cfg.min_transfer_rate,
            cfg.transfer_grace,
            stall=cfg.stall_timeout,
        )
        _TRANSFER_END.set((time.monotonic(), time.time(), self.lag.now()))
        if cut is not None:
            resp.close()  # drop the connection rather than drain it
        off_loop = sitemap or len(raw) > OFF_LOOP_BYTES  # a sitemap may decode to --max-sitemap-bytes
        if unframe is not None:
            parts = await asyncio.to_thread(_decode_all, unframe, raw) if off_loop else _decode_all(unframe, raw)
            if unframe.error is not None:
                raise ResponseRefused(f"the transfer coding {transfer} cannot be undone: {unframe.error}")
            if raw and cut is None and not unframe.truncated and not unframe.complete:
                # The body ended and its coded stream did not: what was decoded is some of
                # the entity, with nothing to say so (no transfer was cut).
                raise ResponseRefused(f"the transfer coding {transfer} ends before its stream does")
            raw = b"".join(parts)
            if unframe.truncated:
                cut = cut or "length"
            off_loop = sitemap or len(raw) > OFF_LOOP_BYTES
        if decoder is None:
            return raw, raw, cut
        # Decoded once the transfer is done (the raw bytes are kept for the WARC record
        # anyway, and the decoder caps its output); a large body on a worker thread, so that
        # the loop goes on reading other hosts' responses meanwhile.
        if off_loop:
            parts = await asyncio.to_thread(_decode_all, decoder, raw)
        else:
            parts = _decode_all(decoder, raw)
        if decoder.error is not None:
            log.debug("cannot decode %s body of %s: %s", content_encoding, resp.url, decoder.error)
            return raw, raw, cut
        if decoder.truncated:
            log.debug("payload of %s cut at %d decoded bytes", resp.url, decoded_cap)
        return raw, b"".join(parts), cut


# Bytes no text file holds: the C0 controls but HTAB, LF, FF and CR, and DEL.
_NOT_TEXT = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def _is_text(raw: bytes) -> bool:
    """Whether ``raw`` is UTF-8 text (what a robots.txt is, RFC 9309 §2.3) without control
    characters, as no compressed stream is."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _NOT_TEXT.search(raw) is None


def _with_clock(record: HostRecord, live: HostRecord) -> HostRecord:
    """``record`` with the clock of ``live`` (its requests' end, holds and delay) where it is
    later or longer."""
    return replace(
        record,
        last_fetch_end=max(record.last_fetch_end, live.last_fetch_end),
        not_before=max(record.not_before, live.not_before),
        delay=max(record.delay, live.delay),
    )


def _codings_named(codings: str) -> bool:
    """Whether a coding list names any coding to undo (not only ``identity``)."""
    return any(c.strip().lower() not in ("", "identity") for c in codings.split(","))


def _decode_all(decoder: CappedDecoder, raw: bytes) -> list[bytes]:
    """A whole body through ``decoder``, its end flushed: the payload's parts.

    Fed in pieces of :data:`DECODE_STEP` bytes (one call on a 3 MiB gzip body decoding to
    50 MiB took 2.7 times as long, growing one output buffer), stopping once capped.
    """
    parts = []
    for at in range(0, len(raw), DECODE_STEP):
        parts.append(decoder.feed(raw[at : at + DECODE_STEP]))
        if decoder.done:
            break
    parts.append(decoder.finish())
    return parts


def store_robots_answer(record: HostRecord, rules: RobotsRules, status: int | None, now: float) -> None:
    """Books a robots.txt answer in the host record, keeping the last good copy apart.

    While answers are good, the latest one is the good copy (``robots_good`` stays empty, so
    the file is not stored twice). The first unreachable answer after a good one moves that
    good answer, with its fetch time, to ``robots_good`` and starts the failing run; further
    unreachable answers keep both; a good answer ends the run.
    """
    previous = record.robots
    if rules.disallow_all:
        if previous is not None and previous.get("kind") != "disallow_all":
            record.robots_good = previous
            record.robots_good_at = record.robots_fetched_at
            record.robots_failing_since = now
        elif record.robots_failing_since <= 0:
            record.robots_failing_since = now
    else:
        record.robots_good = None
        record.robots_good_at = 0.0
        record.robots_failing_since = 0.0
    record.robots = rules.to_dict()
    record.robots_status = status
    record.robots_fetched_at = now


def apply_usage(result: FetchResult, site_usage: usage_prefs.UsageRules, purposes: tuple[str, ...]) -> FetchResult:
    """A fetched result with the usage preferences that applied to it: robots.txt's and its
    ``Content-Usage`` header's. A purpose refused by the header (robots.txt refusals are never
    requested) drops the body here, so it is neither archived nor parsed."""
    if result.outcome != "fetched":
        return result
    header = [v for name, v in result.response_headers if name.lower() == "content-usage"]
    decided = usage_prefs.decide(site_usage, result.url, purposes, header)
    _, bad = usage_prefs.header_preferences(header, purposes)
    refusal = usage_prefs.crawl_refusal(decided)
    result = evolve(result, usage=usage_prefs.record_of(decided), usage_bad_header=bad)
    if refusal is not None:
        result = evolve(result, usage_refused=refusal[:300], body=b"", raw_body=b"")
    return result


def _scheme(url: str) -> str:
    """The scheme of a (normalised) URL: which robots.txt it is under."""
    return url.partition(":")[0].lower()


def _not_fetched(entry: FrontierEntry, outcome: str) -> FetchResult:
    return FetchResult(entry=entry, outcome=outcome, url=entry.url, fetched_at=time.time())


# Why a URL was refused when its robots.txt check passed its work's bound (core/policy/robots_match.py:
# a file whose rules no index sorts out cheaply); counted as fetch/robots_checks_capped.
ROBOTS_CAPPED = "robots.txt check past its work's bound"
# Why a page is given back when a redirect's Retry-After holds it (fetch/deferred_reason/redirect_hold).
REDIRECT_HELD = "held by a redirect's Retry-After"


def _deferred(entry: FrontierEntry, why: str) -> FetchResult:
    return FetchResult(entry=entry, outcome="deferred", url=entry.url, error=why)


def _unfollowed(entry: FrontierEntry, why: str) -> FetchResult:
    """A redirect hop not made: its Location is no URL the crawler can fetch (no request)."""
    return FetchResult(entry=entry, outcome="error", url=entry.url, fetched_at=time.time(), error=why[:500])


def _refused(
    entry: FrontierEntry,
    url: str,
    why: str,
    request_headers: list[tuple[str, str]] | None = None,
    started: float | None = None,
) -> FetchResult:
    """A request the address policy refused: no socket was opened, nothing is archived."""
    reason = why if why.startswith(REFUSED_PREFIX) else f"{REFUSED_PREFIX}{why}"
    return FetchResult(
        entry=entry,
        outcome="refused",
        url=url,
        fetched_at=started or time.time(),
        request_headers=request_headers or [],
        error=reason[:500],
    )


def is_refusal(error: str) -> bool:
    """Whether a resolver error is the address policy's refusal (not DNS trouble)."""
    return error.startswith(REFUSED_PREFIX)


def dns_backoff(failures: int, ttl: float) -> float:
    """Seconds a host waits after its ``failures``-th DNS failure in a row: the negative
    answer's TTL (at least a minute), doubling with each failure, at most a day."""
    return min(DNS_BACKOFF_MAX, max(60.0, ttl) * 2 ** max(0, failures - 1))


def hold_after_dns_failure(record: HostRecord, now: float) -> None:
    """Books a DNS failure in the host record: its URLs are held back with back-off."""
    record.dns_failures += 1
    record.not_before = max(record.not_before, now + dns_backoff(record.dns_failures, record.dns_ttl))


# The kinds a round's report breaks fetch errors and deferrals into (fetch/error_kind/*,
# fetch/deferred_reason/*): a fixed vocabulary, so the counters are few whatever the web says.
ERROR_KINDS = ("dns", "refused_address", "timeout", "connect", "connection_lost", "bad_response", "other")
DEFERRED_REASONS = (
    "window_ended",
    "robots_unknown",
    "robots_unavailable",
    "internal",
    "fenced",
    "redirect_hold",
    "other",
)


def error_kind(reason: str | None) -> str:
    """The kind of a fetch error (no HTTP answer), from its recorded reason: one of
    :data:`ERROR_KINDS`."""
    text = (reason or "").lower()
    if "address" in text and ("refused" in text or "not allowed" in text or "private" in text or "link-local" in text):
        return "refused_address"
    if "dns" in text or "name or service" in text or "resolve" in text or "gaierror" in text or "no address" in text:
        return "dns"
    if "timeout" in text or "timed out" in text or "transfer rate" in text or "stalled" in text:
        return "timeout"
    if "connectorerror" in text or "connection refused" in text or "cannot connect" in text:
        return "connect"
    if (
        "disconnect" in text
        or "reset" in text
        or "payload" in text
        or "connection lost" in text
        or "broken pipe" in text
    ):
        return "connection_lost"
    if "header" in text or "response" in text or "http" in text or "valueerror" in text:
        return "bad_response"
    return "other"


def deferred_reason(reason: str | None) -> str:
    """Why an assigned URL was left for a later round, from its recorded reason: one of
    :data:`DEFERRED_REASONS`."""
    text = (reason or "").lower()
    if "window" in text:
        return "window_ended"
    if "robots.txt unknown" in text:
        return "robots_unknown"
    if "robots.txt unavailable" in text:
        return "robots_unavailable"
    if "internal error" in text:
        return "internal"
    if "fenced" in text:
        return "fenced"
    if "redirect's retry-after" in text:
        return "redirect_hold"
    return "other"


class FetchRunner:
    """Runs a :class:`HostCrawler` on its own thread and event loop.

    ``submit`` hands it host plans from any thread; ``drain`` yields what it emitted as
    ``(kind, value)`` pairs, either what is ready now or, with ``wait=True``, everything until
    all submitted plans are done (a batch of deferred entries as a ``result`` each, made as it
    is taken). The round window starts when the runner starts.
    """

    def __init__(self, cfg: CrawlConfig, guard: RequestGuard | None = None) -> None:
        self.cfg = cfg
        # SimpleQueue: its put and get are C, without queue.Queue's Python-level locks and
        # conditions, which cost the fetch thread and the draining thread a handoff per page.
        # Each item is (kind, value, bytes it holds while it waits).
        self._out: queue.SimpleQueue[tuple[str, Any, int]] = queue.SimpleQueue()
        # What waits in _out, bounded: the loop sends no request while it is full, so a loop
        # that fetches faster than the draining thread parses holds --max-unparsed-bytes, not
        # the round's pages (core/net/backlog.py).
        self.backlog = Backlog(cfg.max_unparsed_bytes)
        self._pending = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="beamcrawl-fetch", daemon=True)
        self._thread.start()
        self.deadline = time.time() + cfg.round_window

        async def _start() -> HostCrawler:  # aiohttp objects belong to the loop they are made in
            crawler = HostCrawler(cfg, self._emit, self.deadline, guard, self.backlog)
            await crawler.open()
            return crawler

        self._crawler = asyncio.run_coroutine_threadsafe(_start(), self._loop).result()

    def _emit(self, kind: str, value: Any) -> None:
        # A deferred batch holds its entries (alive in their plan already) and no body.
        size = result_bytes(value) if kind == "result" else RESULT_OVERHEAD if kind == "deferred" else 0
        if size:
            self.backlog.put(size)
        self._out.put((kind, value, size))

    def levels(self) -> tuple[int, int, int, int]:
        """Hosts started and finished, politeness waits started and finished, so far."""
        c = self._crawler
        return c.hosts_started, c.hosts_finished, c.waits_started, c.waits_finished

    def submit(self, plan: HostPlan) -> None:
        with self._lock:
            self._pending += 1
        fut = asyncio.run_coroutine_threadsafe(self._crawler.crawl(plan), self._loop)
        fut.add_done_callback(lambda _f: self._out.put(("done", None, 0)))

    def drain(self, wait: bool = False, deferred_batches: bool = False) -> Iterator[tuple[str, Any]]:
        """Yields what the loop emitted: what is ready now, or with ``wait`` everything until
        all submitted plans are done.

        A host's deferred entries come as a ``result`` each, or with ``deferred_batches`` as
        the one ``("deferred", (entries, why))`` item they were emitted as: a caller that only
        counts deferrals (the fetch stage: a deferred URL's frontier row stays as it was)
        then makes no result for each of the hundreds of thousands a window's end can defer.

        Waiting, it takes what is ready in batches, pausing :data:`DRAIN_PAUSE` between them
        rather than waking for every result: each wake of this thread takes the GIL from the
        fetch loop's thread, and at a thousand results a second per loop those handoffs
        slowed the loop and cost both threads CPU.
        """
        while True:
            with self._lock:
                if self._pending == 0 and self._out.empty():
                    return
            took = False
            while True:
                try:
                    kind, value, size = self._out.get_nowait()
                except queue.Empty:
                    break
                took = True
                if size:
                    self.backlog.took(size)
                if kind == "done":
                    with self._lock:
                        self._pending -= 1
                    continue
                if kind == "deferred" and not deferred_batches:  # a result each entry, made as it is taken
                    entries, why = value
                    for entry in entries_of([entries], []):  # a row of ours that no longer decodes: left as it is
                        yield "result", _deferred(entry, why)
                    continue
                yield kind, value
            if not wait:
                return
            if not took:
                time.sleep(DRAIN_PAUSE)

    def close(self) -> None:
        async def _shutdown() -> None:
            await self._crawler.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(_shutdown(), self._loop).result(timeout=30)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
            self._loop.close()
