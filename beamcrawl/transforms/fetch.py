"""Fetch: host plans grouped into fetch shards, crawled politely by one asyncio loop each.

Plans are keyed by the shard that owns their host and grouped, so every host has exactly one
owner; with ``--ip-delay`` the shard is chosen by the host's server IP when the resolve stage
found one, so every IP has exactly one owner too and the gap is enforced by one clock per IP
(without it, by the host's name: hosts sharing an address spread over the shards). A worker's
bundle may hold many shards; all of them are crawled in one event loop (a
:class:`~beamcrawl.core.net.fetcher.FetchRunner`), started by the first ``process`` call and
drained in ``finish_bundle``, while results already available flow downstream as they come.

Before each request the loop records the host's clock in the store and checks the round's
fence (state/fence.py): a loop whose round attempt ended, lost the crawl's lease or had its
shard claimed by a restarted task stops within ``FENCE_INTERVAL`` (1 s), and a rerun never
asks a host again before its delay from the last request actually sent.

What follows (parse, and the content-seen probes) stays fused to the fetch: the loop waits on
the network and on each host's delay, so its process has CPU to spare during the window, and
pages parsed while others are fetched are pages the round does not parse after it. The
results are taken from the loop in batches (``FetchRunner.drain``), so parsing them does not
take the GIL from the loop for every page. Measured on simweb (1,000 hosts, 20 s window), this
did 8% more pages per second than a reshuffle to all workers with two worker processes, and
20% more in one process, where the reshuffle was only a cost: every result was pickled and
read back. When the loop fetches faster than the stage parses, it waits before its next request
while ``--max-unparsed-bytes`` of responses are not yet parsed (core/net/backlog.py), so the
stage holds that much, not the window's pages.

Each host's record leaves the stage with its refusals brought up to date by what the host
answered this round (core/policy/refusals.py): every page answered 401/403 to a signed
request, or a robots.txt fetched now that singles our token out, is recorded; an answer
that is neither clears it.

Governed by: --round-window (how long the loop may run), --min-delay/--max-delay, the
timeouts and body cap, --fetch-shards, --max-hosts-in-flight, --max-unparsed-bytes, --ip-delay, --user-agent,
--robots-token, --resolve, --allow-private-networks and --dns-ttl.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Iterable, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from beamcrawl.core.net.fetcher import (
    DEFERRED_REASONS,
    ERROR_KINDS,
    ROBOTS_CAPPED,
    FetchRunner,
    deferred_reason,
    error_kind,
)
from beamcrawl.core.policy import refusals
from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.core.policy.usage_prefs import UsageRules
from beamcrawl.core.runtime import gctune, heap
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.schemas.records import FetchResult, HostPlan, HostRecord
from beamcrawl.state.fence import StoreFence
import beamcrawl.schemas.coders  # noqa: F401  (registers the record coders the output types name)
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collect

__all__ = ["FetchPages", "needs_processing"]

log = logging.getLogger(__name__)
PROGRESS_EVERY = 5.0
LEVELS_EVERY = 1.0  # how often the live-progress counters follow the fetch loop


def _bad_usage_lines(robots_body: bytes, token: str) -> int:
    """How many Content-Signal / Content-Usage lines of our group in a robots.txt state nothing."""
    return UsageRules.from_robots(RobotsRules.parse(robots_body, token)).bad


class _MetricsCollector:
    """The fetch stage's counters: received, success, error, status classes, latency."""

    def __init__(self, usage_token: str | None = None) -> None:
        ns = "fetch"
        # With --purpose: the token whose robots.txt group the usage statements are read from.
        self.usage_token = usage_token
        self.hosts = Metrics.counter(ns, "hosts")
        self.received = Metrics.counter(ns, "received")
        self.success = Metrics.counter(ns, "success")
        self.error = Metrics.counter(ns, "error")
        self.deferred = Metrics.counter(ns, "deferred")
        self.robots_disallowed = Metrics.counter(ns, "robots_disallowed")
        # Of those, refused by a robots.txt check past its work's bound (a hostile file).
        self.robots_capped = Metrics.counter(ns, "robots_checks_capped")
        # Usage preferences (--purpose): URLs not fetched for robots.txt's, pages whose body
        # was dropped for their Content-Usage header's, headers that did not parse.
        self.usage_refused = Metrics.counter(ns, "usage_refused")
        self.usage_header_refused = Metrics.counter(ns, "usage_header_refused")
        self.usage_bad_header = Metrics.counter(ns, "usage_bad_header")
        self.usage_bad_robots_lines = Metrics.counter(ns, "usage_bad_robots_lines")
        self.refused = Metrics.counter(ns, "refused")  # the address policy: no socket opened
        self.robots_fetches = Metrics.counter(ns, "robots_fetches")
        self.bytes = Metrics.counter(ns, "bytes")
        self.latency_ms = Metrics.distribution(ns, "latency_ms")
        self.politeness_wait_ms = Metrics.distribution(ns, "politeness_wait_ms")
        # Requests held back because the stage had not parsed --max-unparsed-bytes of
        # responses yet, and how long they waited in all (core/net/backlog.py).
        self.backlog_waits = Metrics.counter(ns, "backlog_waits")
        self.backlog_wait_ms = Metrics.counter(ns, "backlog_wait_ms")
        self.status = {c: Metrics.counter(ns, f"status/{c}xx") for c in range(1, 6)}
        # The report's breakdowns of errors and deferrals (a fixed vocabulary each).
        self.error_kinds = {k: Metrics.counter(ns, f"error_kind/{k}") for k in ERROR_KINDS}
        self.deferred_reasons = {k: Metrics.counter(ns, f"deferred_reason/{k}") for k in DEFERRED_REASONS}
        # Live progress: running totals of the fetch loop, published once a second (their
        # differences are the hosts crawling now and the hosts waiting on their delay).
        self.levels = tuple(
            Metrics.counter(ns, name) for name in ("hosts_started", "hosts_finished", "waits_started", "waits_finished")
        )
        self.published = [0, 0, 0, 0]
        # The same counts as plain numbers, per bundle, for the store's progress row (a runner
        # may report the counters above only when the job ends: state/fence.py).
        self.totals: dict[str, int] = {}

    def _add(self, name: str, value: int = 1) -> None:
        self.totals[name] = self.totals.get(name, 0) + value

    def publish_levels(self, levels: tuple[int, int, int, int]) -> None:
        """Brings the live-progress counters up to a fetch loop's running totals."""
        for i, (counter, value) in enumerate(zip(self.levels, levels)):
            if value > self.published[i]:
                counter.inc(value - self.published[i])
                self.published[i] = value
        for name, value in zip(("hosts_started", "hosts_finished", "waits_started", "waits_finished"), levels):
            self.totals[f"fetch/{name}"] = value

    def count_deferred(self, n: int, why: str) -> None:
        """Counts ``n`` URLs a host left deferred together (as :meth:`count` counts each)."""
        self.received.inc(n)
        self._add("fetch/received", n)
        self.deferred.inc(n)
        self.deferred_reasons[deferred_reason(why)].inc(n)

    def count(self, result: FetchResult) -> None:
        self.received.inc()
        self._add("fetch/received")
        if result.outcome == "fetched":
            self.success.inc()
            self.bytes.inc(len(result.raw_body))
            self._add("fetch/success")
            self._add("fetch/bytes", len(result.raw_body))
            self.latency_ms.update(int(result.elapsed * 1000))
            self.politeness_wait_ms.update(int(result.waited * 1000))
            klass = result.status // 100
            if klass in self.status:
                self.status[klass].inc()
            if result.entry.source == "robots":
                self.robots_fetches.inc()
                self._add("fetch/robots_fetches")
                if self.usage_token and 200 <= result.status < 300:
                    self.usage_bad_robots_lines.inc(_bad_usage_lines(result.body, self.usage_token))
            if result.usage_refused:
                self.usage_header_refused.inc()
            if result.usage_bad_header:
                self.usage_bad_header.inc()
        elif result.outcome == "error":
            self.error.inc()
            self._add("fetch/error")
            self.error_kinds[error_kind(result.error)].inc()
        elif result.outcome == "deferred":
            self.deferred.inc()
            self.deferred_reasons[deferred_reason(result.error)].inc()
        elif result.outcome == "robots_disallowed":
            self.robots_disallowed.inc()
            if result.error == ROBOTS_CAPPED:
                self.robots_capped.inc()
        elif result.outcome == "usage_refused":
            self.usage_refused.inc()
        elif result.outcome == "refused":
            self.refused.inc()


class _RefusalWatch:
    """What each host of a bundle answered this round, as far as refusals go, until its
    record comes out of the fetch loop (after all of its results): then the record's
    refusals are updated (:func:`refusals.update_after_round`) and counted."""

    def __init__(self, cfg: CrawlConfig) -> None:
        self.cfg = cfg
        self.identity = refusals.crawl_identity(cfg)
        self.answers: dict[str, list[refusals.Answer]] = {}  # signed 401/403 answers, while all are
        self.served: set[str] = set()  # hosts that answered something else
        self.robots: set[str] = set()  # hosts whose robots.txt was fetched
        self.recorded = {k: Metrics.counter("fetch", f"refusals_recorded/{k}") for k in refusals.KINDS}
        self.cleared = {k: Metrics.counter("fetch", f"refusals_cleared/{k}") for k in refusals.KINDS}

    def observe(self, result: FetchResult) -> None:
        host = result.entry.host
        if result.entry.source == "robots":
            self.robots.add(host)
            return
        if result.outcome != "fetched":
            return
        if host in self.served:
            return  # it answered something that refuses nothing: that settles the round
        keyid = refusals.keyid_of(result.request_headers) if result.status in refusals.REFUSAL_STATUSES else ""
        if keyid:
            self.answers.setdefault(host, []).append(refusals.Answer(result.status, keyid, result.url))
        else:
            self.served.add(host)
            self.answers.pop(host, None)

    def settle(self, record: HostRecord) -> HostRecord:
        host = record.host
        answers = self.answers.pop(host, [])
        served = host in self.served
        self.served.discard(host)
        fetched_robots = host in self.robots
        self.robots.discard(host)
        if not record.refusals and not fetched_robots and not answers:
            return record  # nothing to record and nothing to clear: the usual host
        if served:
            answers = [refusals.Answer(200, "", "")]  # stands for the answers that refused nothing
        robots = None
        if fetched_robots and record.robots is not None:
            robots = RobotsRules.from_dict(record.robots, self.cfg.robots_token)
        updated, noted, cleared = refusals.update_after_round(
            record.refusals, self.identity, answers, robots, time.time()
        )
        for kind in noted:
            self.recorded[kind].inc()
        for kind in cleared:
            self.cleared[kind].inc()
        if updated != record.refusals:
            record.refusals = updated
        return record


class _FetchShardsFn(beam.DoFn):
    """Crawls every host plan of a bundle's shards in one event loop.

    Outputs ``FetchResult`` on the main output and the updated ``HostRecord`` of every
    host, tagged ``hosts``.
    """

    def __init__(self, cfg: CrawlConfig, attempt: str | None = None) -> None:
        self.cfg = cfg
        self.metrics: _MetricsCollector | None = None
        self.dead = Outlet("fetch")
        # Records each host's clock before each request and reads the round's fence; opened
        # on the worker (it pickles as its store URI and the attempt's token).
        self.fence = StoreFence(cfg.store, attempt)

    def setup(self) -> None:
        gctune.tune()
        self.metrics = _MetricsCollector(self.cfg.robots_token if self.cfg.purposes else None)
        self.refusals = _RefusalWatch(self.cfg)

    def start_bundle(self) -> None:
        self.runner: FetchRunner | None = None
        self.fetched = 0
        self.next_progress = time.monotonic() + PROGRESS_EVERY
        self.next_levels = 0.0
        self.loop_id = uuid.uuid4().hex  # its progress row's name (state/fence.py)
        if self.metrics is not None:
            self.metrics.published = [0, 0, 0, 0]  # a new bundle's runner counts from zero
            self.metrics.totals = {}

    def process(self, element: tuple[int, Iterable[HostPlan]]) -> Iterator[Any]:
        shard, plans = element
        self.fence.claim(shard)  # before any request: a loop of an earlier try stops
        if self.runner is None:
            self.runner = FetchRunner(self.cfg, self.fence)
        for plan in plans:
            assert self.metrics is not None
            self.metrics.hosts.inc()
            try:
                self.dead.check(plan)
            except Exception as exc:  # the host is not crawled; its URLs stay queued
                yield self.dead.tagged(exc, plan)
                continue
            self.runner.submit(plan)
        for kind, value in self.runner.drain(wait=False, deferred_batches=self._batch_deferrals()):
            out = self._route(kind, value)
            if out is not None:
                yield out
        self._publish_levels(time.monotonic())

    def finish_bundle(self) -> Iterator[Any]:
        if self.runner is None:
            return
        try:
            for kind, value in self.runner.drain(wait=True, deferred_batches=self._batch_deferrals()):
                out = self._route(kind, value)
                if out is None:
                    continue
                if isinstance(out, beam.pvalue.TaggedOutput):
                    yield beam.pvalue.TaggedOutput(out.tag, GlobalWindows.windowed_value(out.value))
                else:
                    yield GlobalWindows.windowed_value(out)
        finally:
            self._publish_levels(float("inf"))
            self.runner.close()
            self._report_backlog(self.runner)
            self.runner = None
            # The loop's thread is gone: what it freed (responses, plans, parsers) goes back
            # to the system now, before the stages after the fetch grow on top of it.
            heap.release()
            if self.fence.requests:
                log.debug(
                    "fetch: %d host clocks recorded in %d store writes, %.1f ms a request",
                    self.fence.requests,
                    self.fence.flushes,
                    1000 * self.fence.wait_seconds / self.fence.requests,
                )

    def teardown(self) -> None:
        self.fence.close()

    def _report_backlog(self, runner: FetchRunner) -> None:
        backlog = runner.backlog
        if self.metrics is not None and backlog.waits:
            self.metrics.backlog_waits.inc(backlog.waits)
            self.metrics.backlog_wait_ms.inc(int(backlog.waited * 1000))
        # INFO only when the stage held the loop back (a line a user should see), else DEBUG.
        log.log(
            logging.INFO if backlog.waits else logging.DEBUG,
            "fetch: at most %.1f MB of responses waited to be parsed; %d requests waited %.1f s for the stage",
            backlog.peak / 1e6,
            backlog.waits,
            backlog.waited,
        )

    def _batch_deferrals(self) -> bool:
        """Whether a host's deferred entries may be counted as one batch: always, unless a test
        injected faults into this stage's elements (each result must then meet them)."""
        return not self.dead.faulty()

    def _route(self, kind: str, value: Any) -> Any:
        """What an item of the fetch loop becomes downstream; None for a batch of deferred
        entries, which is only counted (``needs_processing`` would drop each result)."""
        if kind == "deferred":
            entries, why = value
            assert self.metrics is not None
            self.metrics.count_deferred(len(entries), why)
            return None
        if kind == "host":
            try:
                value = self.refusals.settle(value)
            except Exception as err:  # the record goes out as the loop left it
                log.warning("refusals of %s not updated: %r", value.host, err)
            return beam.pvalue.TaggedOutput("hosts", (value.host, value))
        if kind == "failed":  # a host's crawl raised: its URLs came back deferred
            plan, exc = value
            return beam.pvalue.TaggedOutput(ERRORS, self.dead.letter(exc, plan))
        assert self.metrics is not None
        try:
            self.dead.check(value)
            self.metrics.count(value)
            self.refusals.observe(value)
        except Exception as exc:
            return beam.pvalue.TaggedOutput(ERRORS, self.dead.letter(exc, value))
        if value.outcome == "fetched":
            self.fetched += 1
        now = time.monotonic()
        self._publish_levels(now)
        if now >= self.next_progress:
            self.next_progress = now + PROGRESS_EVERY
            log.info("fetch: %d responses so far in this bundle", self.fetched)
        return value

    def _publish_levels(self, now: float) -> None:
        if now >= self.next_levels and self.runner is not None and self.metrics is not None:
            self.next_levels = now + LEVELS_EVERY
            self.metrics.publish_levels(self.runner.levels())
            self.fence.publish(self.loop_id, self.metrics.totals)


def needs_processing(result: FetchResult) -> bool:
    """Whether a result goes on to parse, store and record: every one but ``deferred`` (a URL
    the round did not get to; its frontier row stays as it was and nothing is archived)."""
    return result.outcome != "deferred"


class FetchPages(beam.PTransform):
    """Fetches host plans politely.

    Returns a tuple of PCollections: ``results`` (``FetchResult``, one per planned URL and
    per robots.txt request; a URL a host left unreached when the window ended, or deferred
    with the rest of its host's, is only counted: ``fetch/deferred`` and its reasons) and
    ``hosts`` (``(host, HostRecord)`` after the round).
    """

    def __init__(self, cfg: CrawlConfig, attempt: str | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.attempt = attempt  # the round attempt's token (state/fence.py); None: no attempt fence

    def expand(self, plans: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        fetched = (
            plans
            | "Key by fetch shard" >> beam.Map(lambda plan: (plan.shard, plan)).with_output_types(tuple[int, HostPlan])
            | "Group by fetch shard" >> beam.GroupByKey()
            | "Fetch politely"
            >> beam.ParDo(_FetchShardsFn(self.cfg, self.attempt)).with_outputs("hosts", ERRORS, main="results")
        )
        collect(fetched[ERRORS])
        return fetched
