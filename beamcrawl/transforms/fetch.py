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
read back.

Governed by: --round-window (how long the loop may run), --min-delay/--max-delay, the
timeouts and body cap, --fetch-shards, --max-hosts-in-flight, --ip-delay, --user-agent,
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
    FetchRunner,
    deferred_reason,
    error_kind,
)
from beamcrawl.core.runtime import gctune
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.schemas.records import FetchResult, HostPlan
from beamcrawl.state.fence import StoreFence
import beamcrawl.schemas.coders  # noqa: F401  (registers the record coders the output types name)
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collect

__all__ = ["FetchPages", "needs_processing"]

log = logging.getLogger(__name__)
PROGRESS_EVERY = 5.0
LEVELS_EVERY = 1.0  # how often the live-progress counters follow the fetch loop


class _MetricsCollector:
    """The fetch stage's counters: received, success, error, status classes, latency."""

    def __init__(self) -> None:
        ns = "fetch"
        self.hosts = Metrics.counter(ns, "hosts")
        self.received = Metrics.counter(ns, "received")
        self.success = Metrics.counter(ns, "success")
        self.error = Metrics.counter(ns, "error")
        self.deferred = Metrics.counter(ns, "deferred")
        self.robots_disallowed = Metrics.counter(ns, "robots_disallowed")
        self.refused = Metrics.counter(ns, "refused")  # the address policy: no socket opened
        self.robots_fetches = Metrics.counter(ns, "robots_fetches")
        self.bytes = Metrics.counter(ns, "bytes")
        self.latency_ms = Metrics.distribution(ns, "latency_ms")
        self.politeness_wait_ms = Metrics.distribution(ns, "politeness_wait_ms")
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
        elif result.outcome == "error":
            self.error.inc()
            self._add("fetch/error")
            self.error_kinds[error_kind(result.error)].inc()
        elif result.outcome == "deferred":
            self.deferred.inc()
            self.deferred_reasons[deferred_reason(result.error)].inc()
        elif result.outcome == "robots_disallowed":
            self.robots_disallowed.inc()
        elif result.outcome == "refused":
            self.refused.inc()


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
        self.metrics = _MetricsCollector()

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
        for kind, value in self.runner.drain(wait=False):
            yield self._route(kind, value)
        self._publish_levels(time.monotonic())

    def finish_bundle(self) -> Iterator[Any]:
        if self.runner is None:
            return
        try:
            for kind, value in self.runner.drain(wait=True):
                out = self._route(kind, value)
                if isinstance(out, beam.pvalue.TaggedOutput):
                    yield beam.pvalue.TaggedOutput(out.tag, GlobalWindows.windowed_value(out.value))
                else:
                    yield GlobalWindows.windowed_value(out)
        finally:
            self._publish_levels(float("inf"))
            self.runner.close()
            self.runner = None
            if self.fence.requests:
                log.debug(
                    "fetch: %d host clocks recorded in %d store writes, %.1f ms a request",
                    self.fence.requests,
                    self.fence.flushes,
                    1000 * self.fence.wait_seconds / self.fence.requests,
                )

    def teardown(self) -> None:
        self.fence.close()

    def _route(self, kind: str, value: Any) -> Any:
        if kind == "host":
            return beam.pvalue.TaggedOutput("hosts", (value.host, value))
        if kind == "failed":  # a host's crawl raised: its URLs came back deferred
            plan, exc = value
            return beam.pvalue.TaggedOutput(ERRORS, self.dead.letter(exc, plan))
        assert self.metrics is not None
        try:
            self.dead.check(value)
            self.metrics.count(value)
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
    per robots.txt request) and ``hosts`` (``(host, HostRecord)`` after the round).
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
