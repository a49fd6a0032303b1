"""Assign slots: one place sees a host's due URLs, its record and its policy, and plans.

After a ``CoGroupByKey`` on host, :func:`plan_host` decides which URLs the host gives this
round: robots.txt first when the cached copy is missing or older than its maximum age, then
URLs in priority order, at most ``round_window / delay`` of them, none that the cached
robots.txt forbids; the rest stay queued. Blocked and paused hosts get no slots. Each plan
carries the fetch shard that owns the host, so one fetcher holds the host's clock.

Governed by: --min-delay, --max-delay, --round-window, --fetch-shards, and the operator's
host policies.
"""

from __future__ import annotations

import math
from typing import Iterable, Iterator

import apache_beam as beam
import mmh3
from apache_beam.metrics import Metrics

from beamcrawl.core import politeness
from beamcrawl.core.config import CrawlConfig
from beamcrawl.core.robots import RobotsRules
from beamcrawl.schemas.records import FrontierEntry, HostPlan, HostPolicy, HostRecord

__all__ = ["AssignSlots", "plan_host", "shard_of"]


def shard_of(host: str, shards: int) -> int:
    """The fetch shard that owns ``host`` (stable across processes, unlike ``hash``)."""
    return mmh3.hash(host.encode(), seed=0, signed=False) % shards


def _dedupe(entries: Iterable[FrontierEntry]) -> list[FrontierEntry]:
    """One entry per fingerprint; the others' frontier keys ride along to be deleted."""
    by_fp: dict[int, FrontierEntry] = {}
    for entry in entries:
        kept = by_fp.get(entry.fp)
        if kept is None:
            by_fp[entry.fp] = entry
            continue
        first, other = (kept, entry) if (kept.due_ms, kept.priority) <= (entry.due_ms, entry.priority) else (entry, kept)
        first.also_keys = sorted(set(first.also_keys) | {other.key.hex()} | set(other.also_keys))
        by_fp[entry.fp] = first
    return list(by_fp.values())


def plan_host(
    host: str,
    entries: Iterable[FrontierEntry],
    record: HostRecord | None,
    policy: HostPolicy | None,
    cfg: CrawlConfig,
    now: float,
) -> HostPlan | None:
    """Decides what ``host`` fetches this round; None when it fetches nothing.

    Args:
        host: the politeness slot key (host[:port]).
        entries: the host's due frontier entries.
        record: the host's stored record (None for a host never seen).
        policy: the operator's policy for the host, if any.
        cfg: crawl settings (delays, round window, shards).
        now: the round's start, epoch seconds.
    """
    record = record or HostRecord(host=host)
    if policy is not None and (policy.blocked or (policy.pause_until or 0) > now):
        return None  # stays queued: steering defers, it never deletes
    queued = sorted(_dedupe(entries), key=lambda e: (-e.priority, e.due_ms, e.fp))
    if not queued:
        return None

    policy_min = (policy.min_delay_ms / 1000.0) if policy and policy.min_delay_ms else None
    rules = RobotsRules.from_dict(record.robots) if record.robots else None
    fetch_robots = rules is None or now - record.robots_fetched_at > cfg.robots_max_age
    crawl_delay = None if fetch_robots or rules is None else rules.crawl_delay()
    floor = politeness.base_delay(cfg, crawl_delay, 0.0, policy_min)
    delay = max(floor, record.delay)

    slots = max(1, math.floor(cfg.round_window / delay))
    if fetch_robots:
        slots = max(0, slots - 1)
    if cfg.max_urls_per_host:
        slots = min(slots, cfg.max_urls_per_host)

    chosen: list[FrontierEntry] = []
    disallowed: list[FrontierEntry] = []
    for entry in queued:
        if len(chosen) >= slots:
            break
        if not fetch_robots and rules is not None and rules.kind == "parsed" and not rules.allowed(entry.url):
            disallowed.append(entry)  # costs no slot: no request is made
            continue
        chosen.append(entry)
    if not chosen and not fetch_robots and not disallowed:
        return None
    return HostPlan(
        host=host,
        shard=shard_of(host, cfg.fetch_shards),
        record=record,
        delay=floor,
        fetch_robots=fetch_robots,
        entries=chosen,
        disallowed=disallowed,
    )


class _PlanFn(beam.DoFn):
    def __init__(self, cfg: CrawlConfig, now: float) -> None:
        self.cfg = cfg
        self.now = now
        self.planned_hosts = Metrics.counter("assign_slots", "hosts_planned")
        self.idle_hosts = Metrics.counter("assign_slots", "hosts_idle")
        self.slots = Metrics.counter("assign_slots", "urls_assigned")
        self.deferred = Metrics.counter("assign_slots", "urls_deferred")

    def process(self, element: tuple[str, dict[str, list]]) -> Iterator[HostPlan]:
        host, groups = element
        entries = list(groups["due"])
        records = list(groups["hosts"])
        policies = list(groups["policies"])
        plan = plan_host(
            host,
            entries,
            records[0] if records else None,
            policies[0] if policies else None,
            self.cfg,
            self.now,
        )
        if plan is None:
            self.idle_hosts.inc()
            self.deferred.inc(len(entries))
            return
        self.planned_hosts.inc()
        self.slots.inc(len(plan.entries))
        self.deferred.inc(len(entries) - len(plan.entries) - len(plan.disallowed))
        yield plan


class AssignSlots(beam.PTransform):
    """Joins due URLs, host records and policies on host and plans each host's round.

    Input: a dict ``{"due": (host, FrontierEntry), "hosts": (host, HostRecord),
    "policies": (host, HostPolicy)}`` of PCollections. Output: ``HostPlan`` per host.
    """

    def __init__(self, cfg: CrawlConfig, now: float) -> None:
        super().__init__()
        self.cfg = cfg
        self.now = now

    def expand(self, inputs: dict[str, beam.PCollection]) -> beam.PCollection:
        return (
            inputs
            | "Join by host" >> beam.CoGroupByKey()
            | "Plan each host" >> beam.ParDo(_PlanFn(self.cfg, self.now))
        )
