"""Assign slots: one place sees a host's due URLs, its record and its policy, and plans.

After a ``CoGroupByKey`` on host, :func:`plan_host` decides which URLs the host gives this
round: robots.txt first when the cached answer is missing, older than its maximum age or
"unreachable" and due for a retry (core/policy/robots.py: 5 minutes, doubling to hourly; a host
whose robots.txt is unreachable and not yet due gets no slots, unless its last good copy
stands in after 24 h), then URLs in priority order, as
many as fit between the host's next allowed time and the end of the round window at its
delay (new URLs and revisits ranked on one scale, see :func:`ranking`), none that the robots
rules in force forbid, and at most ``--max-new-urls-per-host``
never-fetched ones (revisits are not capped); the rest stay queued. A host whose
Retry-After or back-off holds it past the window gets no slots at all. Blocked (policy or
``--blocklist``) and paused hosts get no slots either; their URLs stay queued. So does a host
that refused the crawl's identity (core/policy/refusals.py: a 401/403 to signed requests, a
robots.txt that singles our token out) while the refusal is in force; at its recheck it gets
one URL (after a status back-off) or its robots.txt alone (a refusal read in robots.txt).

Each plan carries the fetch shard that owns the host: with a per-IP gap (``--ip-delay``), the
hash of its server IP when the resolve stage found one, so every server IP has exactly one
owner, which holds its clock; otherwise (the default) the hash of its name, so hosts that
share an address (shared hosting; every simweb host) still spread over all the shards and
workers. Either way every host has exactly one owner.

Governed by: --min-delay, --max-delay, --round-window, --fetch-shards, --blocklist,
--max-new-urls-per-host, and the operator's host policies.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from beamcrawl.core.policy import change_rate as freshness
from beamcrawl.core.policy import politeness, refusals
from beamcrawl.core.policy.budget_rules import cap_new_pages
from beamcrawl.core.policy.robots import RobotsRules, cached_rules, retry_unreachable_at
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.core.urls.hostkeys import blocklisted, shard_of
from beamcrawl.schemas.records import (
    FrontierEntry,
    HostPlan,
    HostPolicy,
    HostRecord,
    Packed,
)
import beamcrawl.schemas.coders  # noqa: F401  (registers the record coders the output types name)
from beamcrawl.schemas.due_rows import DueRows, entries_of
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collect

__all__ = [
    "AssignSlots",
    "blocklisted",
    "dedupe_entries",
    "fetch_shard",
    "from_operator",
    "hold_reason",
    "is_new_url",
    "packed_plan",
    "plan_host",
    "ranking",
    "refusal_holding",
    "robots_due",
    "shard_of",
    "url_scheme",
]

# Frontier sources of URLs fetched before (the revisit scheduler's); any other is new.
REVISIT_SOURCES = frozenset({"revisit"})
# Ways in of the URLs the operator gave (``crawl --seeds``, ``beamcrawl submit``): the caps
# on new hosts and new URLs are for what the crawl discovers (wildcard DNS), not for these.
OPERATOR_SOURCES = frozenset({"seed", "submit"})


def fetch_shard(host: str, record: HostRecord | None, shards: int, ip_delay: float = 0.0) -> int:
    """The fetch shard of a host.

    With a per-IP gap (``ip_delay > 0``) and the server IP known: by the IP, so that all
    hosts on one IP share one owner, which holds the IP's clock. Otherwise by the host's
    name: nothing is counted per IP, and keying by IP would put every host of a shared
    address in one shard (one worker, one core).
    """
    if ip_delay > 0 and record is not None and record.ip and not record.dns_error:
        return shard_of(f"ip:{record.ip}", shards)
    return shard_of(host, shards)


def hold_reason(
    host: str, record: HostRecord | None, policy: HostPolicy | None, cfg: CrawlConfig, now: float
) -> str | None:
    """Why the host gets no slots this round whatever is queued, or None.

    ``"blocklisted"`` (--blocklist), ``"blocked"`` or ``"paused"`` (operator policy),
    ``"refused"`` (the host refused the crawl's identity and the refusal is in force), or
    ``"held"`` (Retry-After or back-off keeps it off past the round window). The delay used
    for the "held" check is the host's stored one, as :func:`plan_host` uses.
    """
    if cfg.blocklist and blocklisted(host, cfg.blocklist):
        return "blocklisted"
    if policy is not None and policy.blocked:
        return "blocked"
    if policy is not None and (policy.pause_until or 0) > now:
        return "paused"
    if record is not None and refusal_holding(record, cfg, now) is not None:
        return "refused"
    if record is not None and (
        politeness.next_allowed(record.last_fetch_end, record.delay, record.not_before) >= now + cfg.round_window
    ):
        return "held"
    return None


def robots_due(record: HostRecord, cfg: CrawlConfig, now: float) -> bool:
    """Whether the host's robots.txt (the scheme last asked) is older than its maximum age."""
    return now - record.robots_fetched_at > cfg.robots_max_age


def refusal_holding(record: HostRecord, cfg: CrawlConfig, now: float) -> refusals.Refusal | None:
    """The refusal of the crawl's identity that holds the host now, or None."""
    if not record.refusals:
        return None
    return refusals.in_force(record.refusals, refusals.crawl_identity(cfg), now, robots_due(record, cfg, now))


def is_new_url(entry: FrontierEntry) -> bool:
    """Whether a queued URL was never fetched (a discovery, not a revisit)."""
    return entry.source not in REVISIT_SOURCES


def from_operator(entry: FrontierEntry) -> bool:
    """Whether the operator gave this URL (a seed or a submission), not the web."""
    return entry.source in OPERATOR_SOURCES


def _capped_as_new(entry: FrontierEntry) -> bool:
    return is_new_url(entry) and not from_operator(entry)


def dedupe_entries(entries: Iterable[FrontierEntry]) -> list[FrontierEntry]:
    """One entry per fingerprint; the others' frontier keys ride along to be deleted."""
    by_fp: dict[int, FrontierEntry] = {}
    for entry in entries:
        kept = by_fp.get(entry.fp)
        if kept is None:
            by_fp[entry.fp] = entry
            continue
        first, other = (
            (kept, entry) if (kept.due_ms, kept.priority) <= (entry.due_ms, entry.priority) else (entry, kept)
        )
        first.also_keys = sorted(set(first.also_keys) | {other.key.hex()} | set(other.also_keys))
        # A URL submitted again by hand keeps what its scheduled revisit knows (validators),
        # and the revisit takes the higher priority of the two.
        if first.revisit is None and other.revisit:
            first.revisit = other.revisit
        first.priority = max(first.priority, other.priority)
        by_fp[entry.fp] = first
    return list(by_fp.values())


def ranking(entries: list[FrontierEntry], cfg: CrawlConfig, now: float) -> dict[int, float]:
    """Each entry's priority at ``now``, on the crawl's one scale: a new URL's is its
    queue priority (its importance); a scheduled revisit's, under the adaptive policy, the
    freshness a fetch now buys (``freshness.priority_now``, so the longer a page has waited
    the more it is worth; a sitemap's, the chance it has news). Work submitted by hand keeps
    its level."""
    policy = None
    ranks: dict[int, float] = {}
    for entry in entries:
        rank = entry.priority
        if entry.source == "revisit" and entry.revisit and cfg.revisit_policy == "adaptive":
            policy = policy or cfg.schedule_policy()
            state = freshness.RevisitState.from_dict(entry.revisit)
            if entry.kind == "sitemap" and state.checked_at is not None:
                # A sitemap or feed is worth reading when it has news, however often it
                # changes: its worth is the chance it changed, not the freshness of a copy.
                rank = freshness.change_priority(state.importance, state.lam, now - state.checked_at)
            else:
                rank = freshness.priority_now(state, now, policy)
            if entry.lastmod is not None:
                rank = max(rank, entry.priority)  # moved forward by a sitemap's dated claim
        ranks[entry.fp] = rank
    return ranks


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
    if hold_reason(host, record, policy, cfg, now) is not None:
        return None  # stays queued: steering and back-off defer, they never delete
    queued = dedupe_entries(entries)
    ranks = ranking(queued, cfg, now)
    queued.sort(key=lambda e: (-ranks[e.fp], e.due_ms, e.fp))
    if not queued:
        return None
    # A host's sudden flood of fresh links must not crowd out its revisits or take the whole
    # window: the new ones over the cap stay queued for later rounds.
    queued, _later = cap_new_pages(queued, _capped_as_new, cfg.max_new_urls_per_host)

    policy_min = (policy.min_delay_ms / 1000.0) if policy and policy.min_delay_ms else None
    # robots.txt is per scheme (RFC 9309 §2.3): each scheme queued here has its own answer.
    robots = {scheme: _robots_plan(record, scheme, cfg, now) for scheme in dict.fromkeys(map(url_scheme, queued))}
    to_fetch = [scheme for scheme, (_rules, fetch) in robots.items() if fetch]
    fetch_robots = bool(to_fetch)
    # Unreachable and not due for a retry: nothing of that scheme may be fetched.
    closed = {
        scheme for scheme, (rules, fetch) in robots.items() if not fetch and rules is not None and rules.disallow_all
    }
    if len(closed) == len(robots):
        return None
    delays = [
        rules.crawl_delay()
        for scheme, (rules, fetch) in robots.items()
        if rules is not None and not fetch and scheme not in closed
    ]
    crawl_delay = max((d for d in delays if d is not None), default=None)
    floor = politeness.base_delay(cfg, crawl_delay, 0.0, policy_min)
    delay = max(floor, record.delay)

    # The host's clock, not the round's start, decides when its first request may go: a
    # Retry-After or back-off that ends inside the window leaves fewer slots.
    window_end = now + cfg.round_window
    first = max(now, politeness.next_allowed(record.last_fetch_end, delay, record.not_before))
    if first >= window_end:
        return None
    # No delay at all (``--min-delay 0`` and nothing from the host): the window does not
    # bound the host's share, its queue (and --max-urls-per-host) does.
    slots = len(queued) + len(to_fetch) if delay <= 0 else max(1, math.floor((window_end - first) / delay))
    slots = max(0, slots - len(to_fetch))
    if cfg.max_urls_per_host:
        slots = min(slots, cfg.max_urls_per_host)
    if record.refusals:
        # A refusal past its hold is rechecked, never with a full window: its robots.txt
        # alone when robots.txt said it (the URLs wait for the answer), else one URL.
        lapsed = refusals.on_recheck(record.refusals, refusals.crawl_identity(cfg), now)
        rechecks = {r.kind if r.until > 0 else "robots" for r in lapsed}
        if "robots" in rechecks:
            slots = 0
        elif rechecks:
            slots = min(slots, 1)

    chosen: list[FrontierEntry] = []
    disallowed: list[FrontierEntry] = []
    capped = 0  # of those, refused by a check past its work's bound
    for entry in queued:
        if len(chosen) >= slots:
            break
        scheme = url_scheme(entry)
        if scheme in closed:
            continue  # stays queued until its scheme's robots.txt answers again
        rules, fetch = robots[scheme]
        if not fetch and rules is not None and rules.kind == "parsed":
            before = rules.checks_capped
            if not rules.allowed(entry.url):
                disallowed.append(entry)  # costs no slot: no request is made
                capped += rules.checks_capped > before
                continue
        chosen.append(entry)
    if not chosen and not fetch_robots and not disallowed:
        return None
    # A robots.txt that redirects to another host is fetched in that host's shard, so that
    # the hop waits on the one clock that host has (core/net/fetcher.py).
    via = [v for v in (record.robots_view(scheme).robots_via for scheme in to_fetch) if v and v != host]
    shard = fetch_shard(host, record, cfg.fetch_shards, cfg.ip_delay)
    if via and cfg.ip_delay <= 0:
        shard = shard_of(via[0], cfg.fetch_shards)
    return HostPlan(
        host=host,
        shard=shard,
        record=record,
        delay=floor,
        fetch_robots=fetch_robots,
        entries=Packed(chosen),  # crosses the shard shuffle: pickled as rows
        disallowed=Packed(disallowed),
        robots_capped=capped,
        robots_schemes=to_fetch,
        schemes=list(dict.fromkeys(map(url_scheme, chosen))),
    )


def packed_plan(plan: HostPlan) -> HostPlan:
    """The plan with its URLs as :class:`~beamcrawl.schemas.due_rows.DueRows` (their cells,
    compressed), as it crosses the shuffle to its fetch shard and waits there until its host's
    turn comes (``core/net/fetcher.py`` decodes each URL as the crawl reaches it): a fetch shard
    holds all its hosts' plans at once, and most wait for a place among the hosts in flight."""
    return dataclasses.replace(
        plan, entries=DueRows.of_entries(plan.entries), disallowed=DueRows.of_entries(plan.disallowed)
    )


def url_scheme(entry: FrontierEntry) -> str:
    """The scheme of a queued URL (normalised, so lower-case), which robots.txt it is under."""
    return entry.url.partition(":")[0]


def _robots_plan(record: HostRecord, scheme: str, cfg: CrawlConfig, now: float) -> tuple[RobotsRules | None, bool]:
    """The robots rules in force for ``scheme`` on the host, and whether its robots.txt is
    fetched first (missing, older than its maximum age, or unreachable and due a retry)."""
    view = record.robots_view(scheme)
    rules = cached_rules(
        view.robots,
        view.robots_good,
        good_at=view.robots_good_at,
        failing_since=view.robots_failing_since,
        token=cfg.robots_token,
        now=now,
    )
    unreachable = (view.robots or {}).get("kind") == "disallow_all"
    fetch = (
        rules is None
        or now - view.robots_fetched_at > cfg.robots_max_age
        # Unreachable (5xx, 429, no answer): ask again once the retry schedule allows.
        or (unreachable and now >= retry_unreachable_at(view.robots_fetched_at, view.robots_failing_since))
    )
    return rules, fetch


class _PlanFn(beam.DoFn):
    def __init__(self, cfg: CrawlConfig, now: float) -> None:
        self.cfg = cfg
        self.now = now
        self.planned_hosts = Metrics.counter("assign_slots", "hosts_planned")
        self.idle_hosts = Metrics.counter("assign_slots", "hosts_idle")
        self.slots = Metrics.counter("assign_slots", "urls_assigned")
        self.deferred = Metrics.counter("assign_slots", "urls_deferred")
        # Live progress: every result the fetch will give (slots, robots.txt, disallowed URLs).
        self.results_planned = Metrics.counter("assign_slots", "results_planned")
        # Hosts (and their due URLs) that got no slots on purpose, by reason; the round
        # report carries them as assign_slots/hosts_<reason> and assign_slots/urls_<reason>.
        reasons = ("blocklisted", "blocked", "paused", "refused", "held", "robots_unreachable")
        self.held_hosts = {r: Metrics.counter("assign_slots", f"hosts_{r}") for r in reasons}
        self.held_urls = {r: Metrics.counter("assign_slots", f"urls_{r}") for r in reasons}
        self.bad_rows = Metrics.counter("assign_slots", "bad_rows")
        # URLs a robots.txt check refused past its work's bound (a hostile file: the polite answer).
        self.robots_capped = Metrics.counter("assign_slots", "robots_checks_capped")
        self.dead = Outlet("assign_slots")

    def process(self, element: tuple[str, dict[str, list]]) -> Iterator[HostPlan]:
        host, groups = element
        bad: list[tuple[str, Exception]] = []
        entries = entries_of(groups["due"], bad)  # decoded here, once: the select only grouped them
        for key, exc in bad:  # a row that does not decode stays queued, set aside with its reason
            self.bad_rows.inc()
            yield self.dead.tagged(exc, key, host=host)
        records = list(groups["hosts"])
        policies = list(groups["policies"])
        record = records[0] if records else None
        policy = policies[0] if policies else None
        if record is None and entries:
            # Every host with due URLs has a record unless reading or resolving it failed
            # (a dead letter of select or resolve): the host waits, its URLs stay queued.
            self.idle_hosts.inc()
            self.deferred.inc(len(entries))
            return
        try:
            self.dead.check(host)
            plan = plan_host(host, entries, record, policy, self.cfg, self.now)
        except Exception as exc:  # the host gets no slots; its URLs stay queued
            yield self.dead.tagged(exc, host, host=host)
            return
        if plan is None:
            reason = hold_reason(host, record, policy, self.cfg, self.now) if entries else None
            if (
                reason is None
                and entries
                and record is not None
                and (record.robots or {}).get("kind") == "disallow_all"
            ):
                reason = "robots_unreachable"  # and not yet due for a retry (nor a fallback)
            if reason is not None:
                self.held_hosts[reason].inc()
                self.held_urls[reason].inc(len(entries))
            self.idle_hosts.inc()
            self.deferred.inc(len(entries))
            return
        self.planned_hosts.inc()
        self.slots.inc(len(plan.entries))
        self.results_planned.inc(len(plan.entries) + len(plan.disallowed) + int(plan.fetch_robots))
        self.robots_capped.inc(plan.robots_capped)
        self.deferred.inc(len(entries) - len(plan.entries) - len(plan.disallowed))
        yield packed_plan(plan)


class AssignSlots(beam.PTransform):
    """Joins due URLs, host records and policies on host and plans each host's round.

    Input: a dict ``{"due": (host, DueRows), "hosts": (host, HostRecord),
    "policies": (host, HostPolicy)}`` of PCollections. Output: ``HostPlan`` per host.
    """

    def __init__(self, cfg: CrawlConfig, now: float) -> None:
        super().__init__()
        self.cfg = cfg
        self.now = now

    def expand(self, inputs: dict[str, beam.PCollection]) -> beam.PCollection:
        plans = (
            inputs
            | "Join by host" >> beam.CoGroupByKey()
            | "Plan each host"
            >> beam.ParDo(_PlanFn(self.cfg, self.now)).with_output_types(HostPlan).with_outputs(ERRORS, main="plans")
        )
        collect(plans[ERRORS])
        return plans.plans
