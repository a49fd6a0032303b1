"""Resolve hosts: every host with due work gets its server address before slot assignment.

Per-IP politeness needs the address before the fetch: fetch shards are keyed by it, so all
hosts on one server IP land in one shard and one fetch loop holds that IP's clock. The answer
(address, or why there is none) is stored in the host record with when it was obtained and
for how long it holds; a record whose answer is still fresh is not looked up again, and
negative answers are kept just as long (a name that does not resolve is not asked about
again and again). The same ``--resolve`` rules and address policy apply as in the fetcher,
which is pinned to this answer.

A bundle's hosts are resolved together, concurrently, in one asyncio loop run when the bundle
ends (a lookup per element would pay a loop per host, and DNS is latency, not CPU).

Governed by: --resolve, --allow-private-networks, --dns-ttl.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any, Iterable, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from beamcrawl.core.net.netpolicy import ResolveRules
from beamcrawl.core.net.resolver import (
    Lookup,
    PolicyResolver,
    Resolution,
    hostname_of,
    resolve_many,
)
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.schemas.records import HostRecord
import beamcrawl.schemas.coders  # noqa: F401  (registers the record coders the output types name)
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collect, is_infrastructure

__all__ = ["ResolveHosts", "needs_lookup", "resolve_records", "with_resolution"]

#: Lookups in flight at once per bundle (a caching resolver on the node absorbs the rest).
CONCURRENCY = 256


def needs_lookup(record: HostRecord, now: float) -> bool:
    """Whether the record's stored answer (address or error) has expired or was never made,
    or is a refusal by the address policy: the flags of this run decide, not those of the
    run that stored it (an address stored as allowed is judged again where it is used)."""
    return not record.resolution_fresh(now) or (record.dns_error or "").startswith("refused address")


def with_resolution(record: HostRecord, answer: Resolution) -> HostRecord:
    """The record carrying ``answer`` (address, error, time and TTL); the input is not changed."""
    return replace(
        record,
        ip=answer.ip,
        dns_error=answer.error,
        resolved_at=answer.resolved_at,
        dns_ttl=answer.ttl,
    )


def resolve_records(
    records: Iterable[HostRecord],
    cfg: CrawlConfig,
    now: float,
    lookup: Lookup | None = None,
) -> list[HostRecord]:
    """Resolves the records that need it, concurrently in one new event loop; keeps the rest.

    Args:
        records: Host records (their ``host`` is the slot key ``host[:port]``).
        cfg: The crawl's settings (--resolve rules, address policy, DNS TTL).
        now: Epoch seconds, to judge which stored answers are fresh.
        lookup: Replaces the system resolver (tests).

    Returns:
        The records in input order, each with a fresh answer.
    """
    records = list(records)
    stale = [r for r in records if needs_lookup(r, now)]
    if not stale:
        return records
    answers = _run(
        PolicyResolver(ResolveRules(cfg.resolve), cfg.allow_private_networks, cfg.dns_ttl, lookup),
        [hostname_of(r.host) for r in stale],
    )
    return [with_resolution(r, answers[hostname_of(r.host)]) if needs_lookup(r, now) else r for r in records]


def _run(resolver: PolicyResolver, names: list[str]) -> dict[str, Resolution]:
    # A fresh loop each time: in multi-processing mode DoFns run on worker threads, where
    # asyncio.get_event_loop() raises.
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_resolve_and_close(resolver, names))
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()


async def _resolve_and_close(resolver: PolicyResolver, names: list[str]) -> dict[str, Resolution]:
    try:
        return await resolve_many(resolver, names, CONCURRENCY)
    finally:
        await resolver.close()


class _ResolveFn(beam.DoFn):
    """Passes fresh records through; resolves the others in one loop when the bundle ends."""

    def __init__(self, cfg: CrawlConfig, now: float) -> None:
        self.cfg = cfg
        self.now = now
        self.cached = Metrics.counter("resolve", "cached")
        self.lookups = Metrics.counter("resolve", "lookups")
        self.failed = Metrics.counter("resolve", "failed")
        self.dead = Outlet("resolve")

    def start_bundle(self) -> None:
        self.stale: list[HostRecord] = []

    def process(self, element: tuple[str, HostRecord]) -> Iterator[tuple[str, HostRecord]]:
        host, record = element
        try:
            self.dead.check(record)
            stale = needs_lookup(record, self.now)
        except Exception as exc:  # the host gets no record: no slots, its URLs stay queued
            yield self.dead.tagged(exc, element)
            return
        if stale:
            self.stale.append(record)
            return
        self.cached.inc()
        yield host, record

    def _resolved(self, stale: list[HostRecord]) -> list[Any]:
        """The records resolved together; if that fails, each alone (a bad one set aside)."""
        try:
            return list(resolve_records(stale, self.cfg, self.now))
        except Exception as exc:
            if is_infrastructure(exc):
                raise
        out: list[Any] = []
        for record in stale:
            try:
                out.extend(resolve_records([record], self.cfg, self.now))
            except Exception as exc:
                out.append(self.dead.windowed(exc, record))
        return out

    def finish_bundle(self) -> Iterator[WindowedValue]:
        if not self.stale:
            return
        stale, self.stale = self.stale, []
        for record in self._resolved(stale):
            if isinstance(record, beam.pvalue.TaggedOutput):
                yield record
                continue
            self.lookups.inc()
            if record.dns_error:
                self.failed.inc()
            # finish_bundle has no element to inherit a window from.
            yield GlobalWindows.windowed_value((record.host, record))


class ResolveHosts(beam.PTransform):
    """``(host, HostRecord)`` → the same, each record with a fresh DNS answer (or error).

    Args:
        cfg: The crawl's settings.
        now: The round's start (epoch seconds); stored answers younger than their TTL
            at this time are kept.
    """

    def __init__(self, cfg: CrawlConfig, now: float | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.now = time.time() if now is None else now

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        resolved = records | "Look up stale addresses" >> beam.ParDo(_ResolveFn(self.cfg, self.now)).with_output_types(
            tuple[str, HostRecord]
        ).with_outputs(ERRORS, main="records")
        collect(resolved[ERRORS])
        return resolved.records
