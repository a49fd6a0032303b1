"""Freshness: what each fetch says about its page's changes, and when to fetch it again.

After content seen, every fetch outcome of a page (not robots.txt) updates the URL's revisit
state (core/policy/change_rate.py: validators, visits, changes seen, the change-rate estimate λ) and
decides the next visit: ``after_fetch`` reads the status code (200 changed or not by
checksum, 304 unchanged with no body, 404/410 re-checked less and less then dropped,
301/308 moved, 5xx/429/no answer retried with back-off) and sets a due time and a priority.
The page carries both on (``ParsedPage.revisit``, ``ParsedPage.schedule``): the record stage
stages the URL's next frontier row, written when the round commits, and the WARC stage
writes a 304 as a ``revisit`` record.

Two policies: ``adaptive`` (the default: due once probably changed, ranked by the freshness
a fetch buys) and ``uniform`` (every page whose content was seen is due again after the
shortest interval, all at one priority, so the oldest go first: the textbook baseline the
adaptive one is measured against; errors, gone and moved URLs follow the same status-code
rules under both). A sitemap or feed is read again at most once per ``--revisit-horizon``.
Pure functions under one thin DoFn, called once per batch of pages.

Governed by: --revisit-policy, --min-revisit-interval, --max-revisit-interval,
--revisit-horizon, --prior-change-interval, --max-gone-misses.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from beamcrawl.core.archive.warc_revisit import fetch_digest
from beamcrawl.core.content import sitemaps
from beamcrawl.core.net.conditional import is_conditional, validators_from_headers
from beamcrawl.core.policy import change_rate as freshness
from beamcrawl.core.policy.change_rate import FetchOutcome, RevisitState, SchedulePolicy
from beamcrawl.core.policy.politeness import parse_retry_after
from beamcrawl.schemas import cells as binary
from beamcrawl.schemas.records import FrontierEntry, PageBatch, ParsedPage, first_url
from beamcrawl.state.frontier import scheduled_key
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collect

__all__ = ["UNIFORM_PRIORITY", "ScheduleRevisits", "fetch_outcome", "next_entry", "schedule_page", "scheduled_key"]

# The uniform baseline's one priority for every revisit (a link one hop deep has the same).
UNIFORM_PRIORITY = 0.5
# A page found to copy another is worth less: its content is kept under the original's URL.
COPY_IMPORTANCE = 0.5
SCHEDULED = ("fetched", "error")
CONTENT_SEEN = ("first", "changed", "unchanged")


def fetch_outcome(page: ParsedPage) -> FetchOutcome:
    """What one fetch told us, in the schedule's terms."""
    f = page.fetch
    if f.outcome != "fetched":
        return FetchOutcome(status=None, conditional=is_conditional(f.request_headers))
    validators = validators_from_headers(f.response_headers, f.fetched_at)
    location = first_url(page.links, "redirect")
    ok = 200 <= f.status < 300
    return FetchOutcome(
        status=f.status,
        checksum=page.checksum if ok else None,
        simhash=page.simhash if ok else None,
        etag=validators.etag,
        last_modified=validators.last_modified,
        location=location,
        retry_after=parse_retry_after(f.header("retry-after"), f.fetched_at) if f.status in (429, 503) else None,
        conditional=is_conditional(f.request_headers),
        digest=fetch_digest(f) if ok else None,
    )


def _state_before(page: ParsedPage, policy: SchedulePolicy) -> RevisitState:
    entry = page.fetch.entry
    if entry.revisit:
        return RevisitState.from_dict(entry.revisit)
    state = freshness.revisit_state_for(0, entry.source, entry.depth, model=policy.model)
    # The queue priority already holds the URL's worth (its way in, depth, linking hosts);
    # a submitted URL's level may exceed 1, importance may not.
    state.importance = min(1.0, max(freshness.MIN_IMPORTANCE, entry.priority))
    return state


def schedule_page(page: ParsedPage, policy: SchedulePolicy, uniform: bool = False) -> ParsedPage:
    """Sets ``page.revisit`` and ``page.schedule`` for a page or error outcome; leaves
    robots.txt, robots-disallowed and deferred results as they are."""
    f = page.fetch
    if f.outcome not in SCHEDULED or f.entry.source == "robots":
        return page
    now = f.fetched_at or 0.0
    before = _state_before(page, policy)
    if page.duplicate_of is not None and not f.entry.revisit:
        before.importance = max(freshness.MIN_IMPORTANCE, before.importance * COPY_IMPORTANCE)
    state, schedule = freshness.after_fetch(before, fetch_outcome(page), now, policy)
    if f.entry.lastmod is not None and f.entry.revisit:
        # The visit checks the sitemap's claim: how far its lastmod is trusted next time.
        changed = {"changed": True, "unchanged": False}.get(schedule.observed)
        trust = sitemaps.observe_lastmod(
            sitemaps.LastmodTrust(before.lastmod_agree, before.lastmod_disagree),
            lastmod=f.entry.lastmod, span=0.0, since=before.checked_at, changed=changed, now=now,
        )  # fmt: skip
        state.lastmod_agree, state.lastmod_disagree = trust.agree, trust.disagree
    if uniform and schedule.due is not None and schedule.observed in CONTENT_SEEN:
        # The baseline differs only where a revisit policy has a choice: a page whose
        # content was seen. Errors, gone and moved URLs follow the status-code rules.
        due = now + policy.min_interval
        state.next_due = due
        schedule = dataclasses.replace(schedule, due=due, priority=UNIFORM_PRIORITY)
    elif f.entry.kind == "sitemap" and schedule.due is not None and schedule.observed in CONTENT_SEEN:
        # A sitemap or feed changes whenever any page it lists does; read it again once per
        # horizon at most (its lastmods then move the pages that changed forward), not every
        # time it has changed.
        due = max(schedule.due, now + policy.horizon)
        state.next_due = due
        schedule = dataclasses.replace(schedule, due=due)
    page.revisit = state.to_dict()
    page.revisit_cell = binary.encode_revisit(page.revisit)
    page.schedule = {
        "action": schedule.action,
        "due": schedule.due,
        "priority": schedule.priority,
        "observed": schedule.observed,
        "reason": schedule.reason,
    }
    return page


def next_entry(page: ParsedPage) -> FrontierEntry | None:
    """The URL's next frontier row after this fetch (None: not scheduled, or dropped)."""
    schedule = page.schedule
    if not schedule or schedule.get("due") is None or page.revisit is None:
        return None
    entry = page.fetch.entry
    due = float(schedule["due"])
    if not math.isfinite(due):
        return None
    return FrontierEntry(
        url=entry.url,
        fp=entry.fp,
        host=entry.host,
        due_ms=int(due * 1000),
        priority=float(schedule["priority"]),
        depth=entry.depth,
        source="revisit",
        kind=entry.kind,
        hops=entry.hops,
        reason=f"{schedule['action']}: {schedule['observed']}",
        robots_origin=entry.robots_origin,
        revisit=page.revisit,
    )


class _ScheduleFn(beam.DoFn):
    def __init__(self, policy: SchedulePolicy, uniform: bool) -> None:
        self.policy = policy
        self.uniform = uniform
        self.observed = {
            name: Metrics.counter("freshness", name)
            for name in ("first", "changed", "unchanged", "gone", "moved", "redirect", "error")
        }
        self.dropped = Metrics.counter("freshness", "dropped")
        self.dead = Outlet("freshness")

    def process(self, batch: PageBatch) -> Iterator[Any]:
        scheduled: list[ParsedPage] = []
        for page in batch.pages:
            try:
                self.dead.check(page)
                page = schedule_page(page, self.policy, self.uniform)
            except Exception as exc:  # this page's letter; the batch's others go on
                yield self.dead.tagged(exc, page)
                continue
            if page.schedule is not None:
                counter = self.observed.get(page.schedule["observed"])
                if counter is not None:
                    counter.inc()
                if page.schedule["due"] is None:
                    self.dropped.inc()
            scheduled.append(page)
        if scheduled:
            yield PageBatch(scheduled)


class ScheduleRevisits(beam.PTransform):
    """``PageBatch`` → the same batch, each page with its revisit state and next visit
    decided (a page that fails is a dead letter, the batch's others go on)."""

    def __init__(self, policy: SchedulePolicy, revisit_policy: str = "adaptive") -> None:
        super().__init__()
        if revisit_policy not in ("adaptive", "uniform"):
            raise ValueError(f"revisit_policy must be adaptive or uniform, got {revisit_policy!r}")
        self.policy = policy
        self.uniform = revisit_policy == "uniform"

    def expand(self, pages: beam.PCollection) -> beam.PCollection:
        out = pages | "Update change estimate, decide next visit" >> beam.ParDo(
            _ScheduleFn(self.policy, self.uniform)
        ).with_output_types(PageBatch).with_outputs(ERRORS, main="pages")
        collect(out[ERRORS])
        return out.pages
