"""Budgets: what each registered domain may be fetched, tied to its reputation (STAR), with
over-budget URLs deferred to later rounds at growing intervals, never deleted (BEAST).

Three stages, each one pass over data the round already has (core/policy/budget_rules.py has the rules):

* **Apply budgets** sits between reading the due frontier and planning hosts. Due URLs are
  grouped by registered domain; one place sees a domain's URLs and its stored row
  (``domains`` table: linking domains, pages used this period, known host names, seed
  credit). New host names beyond ``--max-new-hosts-per-domain`` this round (or
  ``--max-hosts-per-domain`` in all: wildcard DNS) and URLs beyond the domain's remaining
  budget (best first, by priority) are *deferred*: written back to the frontier with a later
  due time (``--defer-base`` doubling per deferral up to ``--defer-max``), and their old rows
  staged for deletion when the round commits, in that order, so a crash in between leaves a
  URL queued twice (folded when both come due), never lost. The rest go on to slot
  assignment.
* **Count domain usage** books, after fetching, the pages each domain served this round
  into its period's count. The count is kept per round (``round`` and ``before`` in the
  cell), so a round that is rerun after a crash books its pages once.
* **Count linking domains** merges, after parsing, each page's followable links to other
  registered domains into the linked domain's :class:`~beamcrawl.core.policy.budget_rules.LinkingDomains`
  sketch: a union, so counting a page twice (a rerun) changes nothing.

A domain's due time for a deferred URL is anchored on the start of the current deferral
interval (``floor(now / defer_base) × defer_base``), not on the round's clock, so a rerun of
the round writes the very same frontier row again.

Governed by: --domain-budgets, --domain-budget-base, --domain-budget-per-linker,
--domain-budget-cap, --seed-domain-credit, --budget-period, --defer-base, --defer-max,
--max-new-hosts-per-domain, --max-hosts-per-domain (and, in assign_slots,
--max-new-urls-per-host).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass, field, replace
from typing import Any

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from beamcrawl.core.policy.budget_rules import (
    BudgetRules,
    LinkingDomains,
    new_hosts_cap,
    period_usage,
    plan_budget,
)
from beamcrawl.core.runtime import files
from beamcrawl.core.runtime.outputs import DONE, RoundOutputs, part_name
from beamcrawl.core.urls import hostkeys
from beamcrawl.core.urls.hostkeys import host_key
from beamcrawl.core.urls.urlnorm import host_of
from beamcrawl.schemas.due_rows import DueRows, due_rows_by_host, entries_of
from beamcrawl.schemas.records import JSON_CELL, FetchResult, FrontierEntry, PageBatch, ParsedPage, follow_rows
from beamcrawl.state.domains import SEEDED, TABLE, WRITE_BATCH
from beamcrawl.stores.base import Mutation, Store, open_store
from beamcrawl.transforms import dead_letter
from beamcrawl.transforms.assign_slots import dedupe_entries, from_operator
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collect, is_infrastructure

__all__ = [
    "ApplyBudgets",
    "CountDomainUsage",
    "CountLinkingDomains",
    "DomainDecision",
    "DomainState",
    "book_usage",
    "budget_domain",
    "domain_of",
    "due_count",
    "linked_domains",
]

# (linked, linking) domain pairs a bundle holds before it passes them on (~100 bytes each).
LINKER_PAIRS = 50_000
# Due URLs in one batch of domains, at most (a domain with more is a batch of its own): the
# batch's URLs are decoded together to be sorted and folded, ~420 bytes each, where 16 to 512
# domains of any size made a batch before (bench/README.md, "The budgets' batch is not what
# the budgets stage adds"). The least keeps the store's reads few.
BATCH_URLS = 20_000
MIN_BATCH_URLS = 1_000
LINKERS = "d:linkers"
USAGE = "d:usage"
HOSTS = "d:hosts"
# The registered domain of a politeness slot key (``host[:port]``); never empty (an IP is its
# own domain). One definition for every host key, in hostkeys.
domain_of = hostkeys.domain_of


@dataclass
class DomainState:
    """A ``domains`` row: what the budget of one registered domain depends on.

    Attributes:
        domain: The registered domain (the row key).
        linkers: Distinct other registered domains linking to it (a mergeable count).
        period: Start of the budget period ``used`` belongs to (epoch seconds; 0 = none).
        used: Pages fetched from it in that period.
        round: The round that booked pages last, and ``before`` the count before it did (so
            a rerun of that round books its pages once).
        before: See ``round``.
        hosts: Host names it admitted (for the new-host caps).
        seeded: Whether it holds a seed URL (the operator's credit).
    """

    domain: str
    linkers: LinkingDomains = field(default_factory=LinkingDomains)
    period: float = 0.0
    used: int = 0
    round: int = 0
    before: int = 0
    hosts: set[str] = field(default_factory=set)
    seeded: bool = False

    @classmethod
    def from_cells(cls, domain: str, cells: dict[str, bytes] | None) -> DomainState:
        """Reads a row; a cell that does not decode counts as absent (a corrupt cell must
        not stop the crawl: it only forgets some reputation or usage)."""
        state = cls(domain=domain)
        if not cells:
            return state
        try:
            state.linkers = LinkingDomains.from_bytes(cells.get(LINKERS))
        except ValueError:
            pass
        try:
            usage = json.loads(cells[USAGE]) if USAGE in cells else {}
            state.period = float(usage.get("period", 0.0))
            state.used = int(usage.get("used", 0))
            state.round = int(usage.get("round", 0))
            state.before = int(usage.get("before", 0))
        except (ValueError, TypeError, AttributeError):
            pass
        try:
            state.hosts = {str(h) for h in json.loads(cells[HOSTS])} if HOSTS in cells else set()
        except (ValueError, TypeError):
            pass
        state.seeded = cells.get(SEEDED) == b"1"
        return state


def read_domains(store: Store, domains: Iterable[str]) -> dict[str, DomainState]:
    """The rows of ``domains`` in one key-set read (absent rows are empty states)."""
    names = sorted(set(domains))
    rows = store.read_keys(TABLE, [d.encode() for d in names])
    return {d: DomainState.from_cells(d, rows.get(d.encode())) for d in names}


# --- apply budgets ------------------------------------------------------------------------------


@dataclass
class DomainDecision:
    """What one domain's due URLs do this round.

    Attributes:
        allowed: Entries that go on to slot assignment.
        deferred: ``(entry, due seconds)`` for each entry set aside, by the budget or the
            new-host caps; together with ``allowed`` every due entry (after folding rows of
            one fingerprint) is accounted for.
        new_hosts: Host names admitted for the first time (to add to the row).
        over_budget: How many were deferred by the page budget; the rest of ``deferred`` by
            the new-host caps.
        budget: The domain's budget this period, and ``used`` its pages used so far.
        used: See ``budget``.
    """

    allowed: list[FrontierEntry] = field(default_factory=list)
    deferred: list[tuple[FrontierEntry, float]] = field(default_factory=list)
    new_hosts: list[str] = field(default_factory=list)
    over_budget: int = 0
    budget: int = 0
    used: int = 0


def _priority_order(entry: FrontierEntry) -> tuple[float, int, int]:
    return (-entry.priority, entry.due_ms, entry.fp)


def defer_due(rules: BudgetRules, now: float, entry: FrontierEntry) -> float:
    """When a deferred entry is due again: BEAST's growing interval, from an anchor that a
    rerun of the round in the same interval computes alike (so it rewrites the same row)."""
    anchor = math.floor(now / rules.defer_base) * rules.defer_base
    return rules.defer(anchor, entry.deferrals, spread_key=entry.fp)


def budget_domain(
    state: DomainState, entries: Iterable[FrontierEntry], rules: BudgetRules, now: float
) -> DomainDecision:
    """Splits a domain's due entries into those allowed this round and those deferred.

    New host names first: known ones are admitted, new ones up to the caps (best first, by
    the best priority among their URLs); the URLs of the others are deferred. Then the page
    budget: of the admitted hosts' URLs, best first, as many as the budget has room for
    this period are allowed, the rest deferred. Pure: no store, no clock.

    Args:
        state: The domain's stored row.
        entries: Its due frontier entries (several rows of one URL are folded).
        rules: The crawl's budget rules.
        now: The round's start, epoch seconds.
    """
    queued = sorted(dedupe_entries(entries), key=_priority_order)
    out = DomainDecision()
    by_host: dict[str, list[FrontierEntry]] = {}
    for entry in queued:
        by_host.setdefault(host_key(entry.host), []).append(entry)
    # The operator's hosts (seeds, submissions) are admitted as if known: the caps are for
    # host names the crawl discovers. They join the known hosts all the same.
    operator_hosts = {h for h, host_entries in by_host.items() if any(map(from_operator, host_entries))}
    # Hosts in the order of their best URL (queued is best first).
    admission = new_hosts_cap(
        by_host, state.hosts | operator_hosts, per_round=rules.new_hosts_per_round, max_hosts=rules.max_hosts
    )
    if rules.new_hosts_per_round or rules.max_hosts:
        # tracked only while a cap needs them
        out.new_hosts = sorted(operator_hosts - state.hosts) + admission.new
    waiting = set(admission.deferred)
    admitted = []
    for entry in queued:
        if host_key(entry.host) in waiting:
            out.deferred.append((entry, defer_due(rules, now, entry)))
        else:
            admitted.append(entry)

    _, out.used = period_usage(state.period, state.used, now, rules.period)
    out.budget = rules.budget(state.linkers.count(), seeded=state.seeded)
    plan = plan_budget(
        admitted,
        out.used,
        out.budget,
        now,
        times_deferred=lambda e: e.deferrals,
        defer=lambda n, _k, e: defer_due(rules, n, e),
    )
    out.allowed = plan.allowed
    out.deferred.extend(plan.deferred)
    out.over_budget = len(plan.deferred)
    return out


def deferred_row(entry: FrontierEntry, due: float) -> FrontierEntry:
    """The frontier row that replaces a deferred entry (its old rows are deleted at commit)."""
    return replace(entry, due_ms=int(due * 1000), deferrals=entry.deferrals + 1, also_keys=[])


class _BudgetFn(beam.DoFn):
    """Budgets a batch of domains: one key-set read of their rows, the deferred rows written
    at once, their old keys staged for the commit, the allowed entries passed on.

    The old keys go to the bundle's staged file a chunk at a time (``DONE_CHUNK`` keys), not
    held until the bundle ends: a local runner's bundle is the whole round's due rows, and a
    trap's deferrals can be most of them. The file appears under its name when the bundle
    finishes (:class:`~beamcrawl.core.runtime.files.PiecewiseFile`), as when written whole.
    """

    DONE_CHUNK = 4096  # old keys joined and written at once

    def __init__(self, store_uri: str, rules: BudgetRules, now: float, outputs: RoundOutputs) -> None:
        self.store_uri = store_uri
        self.rules = rules
        self.now = now
        self.outputs = outputs
        self.domains = Metrics.counter("budgets", "domains")
        self.over = Metrics.counter("budgets", "domains_over_budget")
        self.allowed = Metrics.counter("budgets", "urls_allowed")
        self.deferred = Metrics.counter("budgets", "urls_deferred")
        self.deferred_budget = Metrics.counter("budgets", "urls_over_budget")
        self.deferred_hosts = Metrics.counter("budgets", "urls_new_host_capped")
        self.new_hosts = Metrics.counter("budgets", "hosts_admitted")
        # Seeds and submissions deferred (by the page budget): named in the round summary.
        self.deferred_operator = Metrics.counter("budgets", "operator_urls_deferred")
        self.dead = Outlet("budgets")

    def setup(self) -> None:
        self.store = open_store(self.store_uri)

    def start_bundle(self) -> None:
        self.done: list[str] = []
        self.done_file: files.PiecewiseFile | None = None

    def process(self, batch: Sequence[tuple[str, list[tuple[str, Iterable[FrontierEntry]]]]]) -> Iterator[Any]:
        try:
            for item in batch:
                self.dead.check(item)
            yield from list(self._budget(batch))
            return
        except Exception as exc:
            if is_infrastructure(exc):
                raise
        # A domain that fails alone is set aside (its URLs neither passed on nor deferred:
        # their frontier rows stay); the batch's other domains are budgeted one by one.
        for item in batch:
            try:
                self.dead.check(item)
                out = list(self._budget([item]))
            except Exception as exc:
                yield self.dead.tagged(exc, item)
                continue
            yield from out

    def _budget(self, batch: Sequence[tuple[str, list[tuple[str, Iterable[FrontierEntry]]]]]) -> Iterator[Any]:
        states = read_domains(self.store, (domain for domain, _ in batch))
        rows: list[FrontierEntry] = []
        known: list[Mutation] = []
        passed: list[tuple[str, Iterable[FrontierEntry]]] = []  # the allowed rows, a host's together
        replaced: list[FrontierEntry] = []  # deferred entries, whose old rows go at commit
        bad: list[tuple[str, Exception, str]] = []  # rows that do not decode: they stay queued
        for domain, keyed in batch:
            state = states[domain]
            entries: list[FrontierEntry] = []
            read: dict[str, list[Iterable[FrontierEntry]]] = {}
            for host, rows_of_host in keyed:  # decoded here: the select only grouped the rows
                failed: list[tuple[str, Exception]] = []
                entries.extend(entries_of([rows_of_host], failed))
                bad.extend((key, exc, host) for key, exc in failed)
                read.setdefault(host, []).append(rows_of_host)
            decision = budget_domain(state, entries, self.rules, self.now)
            passed.extend(_passed_on(read, decision.allowed))
            self.domains.inc()
            self.allowed.inc(len(decision.allowed))
            if decision.deferred:
                self.deferred.inc(len(decision.deferred))
                self.deferred_budget.inc(decision.over_budget)
                self.deferred_hosts.inc(len(decision.deferred) - decision.over_budget)
                self.deferred_operator.inc(sum(1 for entry, _due in decision.deferred if from_operator(entry)))
            if decision.over_budget:
                self.over.inc()
            if decision.new_hosts:
                self.new_hosts.inc(len(decision.new_hosts))
                hosts = sorted(state.hosts | set(decision.new_hosts))
                known.append(Mutation.set(domain.encode(), {HOSTS: json.dumps(hosts).encode()}))
            for entry, due in decision.deferred:
                rows.append(deferred_row(entry, due))
                replaced.append(entry)
        # The new rows first; only then are the old keys staged (to be deleted at commit).
        for i in range(0, len(rows), WRITE_BATCH):
            self.store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for e in rows[i : i + WRITE_BATCH]])
        self.done.extend(key for entry in replaced for key in (entry.key.hex(), *entry.also_keys))
        if len(self.done) >= self.DONE_CHUNK:
            self._stage_done()
        if known:
            self.store.mutate(TABLE, known)
        for key, exc, host in bad:  # each set aside with its reason, once the batch is done
            yield self.dead.tagged(exc, key, host=host)
        yield from passed

    def _stage_done(self) -> None:
        """Appends the old keys held to the bundle's staged file."""
        if not self.done:
            return
        if self.done_file is None:
            self.done_file = files.PiecewiseFile(files.join(self.outputs.staged(DONE), part_name(".txt")))
        self.done_file.write(("\n".join(self.done) + "\n").encode("ascii"))
        self.done = []

    def finish_bundle(self) -> None:
        self._stage_done()
        if self.done_file is not None:
            self.done_file.close()
            self.done_file = None

    def teardown(self) -> None:
        self.store.close()


def _passed_on(
    read: dict[str, list[Iterable[FrontierEntry]]], allowed: list[FrontierEntry]
) -> Iterator[tuple[str, Iterable[FrontierEntry]]]:
    """The allowed rows of a domain, per host: as they were read where every row of the host
    is allowed (most hosts, most rounds: no work), else the allowed entries as new ``DueRows``
    (a host with rows deferred, folded or unreadable)."""
    by_host: dict[str, list[FrontierEntry]] = {}
    for entry in allowed:
        by_host.setdefault(entry.host, []).append(entry)
    for host, chunks in read.items():
        kept = by_host.pop(host, [])
        if len(kept) == sum(map(len, chunks)):  # type: ignore[arg-type]
            yield from ((host, chunk) for chunk in chunks)
        elif kept:
            yield from due_rows_by_host((host, entry.to_cells()[JSON_CELL]) for entry in kept)
    for host, kept in by_host.items():  # an entry filed under no host it was read with: none expected
        yield from due_rows_by_host((host, entry.to_cells()[JSON_CELL]) for entry in kept)


def due_count(element: tuple[str, Sequence[tuple[str, Iterable[FrontierEntry]]]]) -> int:
    """How many due URLs a domain's element holds (a batch of domains is sized by them)."""
    return sum(len(rows) if isinstance(rows, Sized) else 1 for _host, rows in element[1])


def _by_domain(item: tuple[str, DueRows]) -> tuple[str, tuple[str, DueRows]]:
    return domain_of(item[0]), item


def _host_of_item(item: tuple[str, DueRows]) -> str:
    return item[0]


class ApplyBudgets(beam.PTransform):
    """``(host, DueRows)`` due this round → those within their domain's budget and host caps
    (as ``DueRows`` again); the others are deferred in the store (new frontier rows, old ones deleted at commit).

    Args:
        store_uri: The crawl's store.
        rules: ``CrawlConfig.budget_rules()``.
        now: The round's start, epoch seconds.
        outputs: The round's outputs (old frontier keys are staged there for the commit).
        enabled: False passes every entry through (budgets and host caps off).
    """

    def __init__(
        self, store_uri: str, rules: BudgetRules, now: float, outputs: RoundOutputs, enabled: bool = True
    ) -> None:
        super().__init__()
        self.store_uri = store_uri
        self.rules = rules
        self.now = now
        self.outputs = outputs
        self.enabled = enabled

    def expand(self, due: beam.PCollection) -> beam.PCollection:
        if not self.enabled:
            return due
        allowed = (
            due
            | "Key by registered domain" >> dead_letter.Map("budgets", _by_domain, host=_host_of_item)
            | "Group by domain" >> beam.GroupByKey()
            # A grouped value may be a lazy, paged iterable valid only while its element is
            # processed: hold each domain's entries as a list before batching domains.
            | "Hold each domain's URLs" >> beam.MapTuple(lambda domain, items: (domain, list(items)))
            | "Batch domains"
            >> beam.BatchElements(min_batch_size=MIN_BATCH_URLS, max_batch_size=BATCH_URLS, element_size_fn=due_count)
            | "Allow or defer"
            >> beam.ParDo(_BudgetFn(self.store_uri, self.rules, self.now, self.outputs)).with_outputs(
                ERRORS, main="allowed"
            )
        )
        collect(allowed[ERRORS])
        return allowed.allowed


# --- usage --------------------------------------------------------------------------------------


def book_usage(state: DomainState, fetched: int, round_no: int, now: float, period: float) -> dict[str, float | int]:
    """The ``d:usage`` cell after round ``round_no`` fetched ``fetched`` pages of a domain.

    Idempotent per round: booking the same round again (a rerun after a crash) replaces that
    round's pages instead of adding them twice.
    """
    current, used = period_usage(state.period, state.used, now, period)
    if state.round == round_no:
        _, used = period_usage(state.period, state.before, now, period)
    return {"period": current, "used": used + fetched, "round": round_no, "before": used}


class _CountFetchesFn(beam.DoFn):
    """Pages fetched per registered domain in this bundle (robots.txt not counted)."""

    def __init__(self) -> None:
        self.dead = Outlet("budgets")

    def start_bundle(self) -> None:
        self.counts: dict[str, int] = {}

    def process(self, result: FetchResult) -> Iterator[beam.pvalue.TaggedOutput]:
        if result.outcome == "fetched" and result.entry.source != "robots":
            try:
                self.dead.check(result)
                domain = domain_of(result.entry.host)
            except Exception as exc:
                yield self.dead.tagged(exc, result)
                return
            self.counts[domain] = self.counts.get(domain, 0) + 1

    def finish_bundle(self) -> Iterator[WindowedValue]:
        for domain, n in self.counts.items():
            yield GlobalWindows.windowed_value((domain, n))
        self.counts = {}


class _BookUsageFn(beam.DoFn):
    def __init__(self, store_uri: str, round_no: int, now: float, period: float) -> None:
        self.store_uri = store_uri
        self.round_no = round_no
        self.now = now
        self.period = period
        self.dead = Outlet("budgets")

    def setup(self) -> None:
        self.store = open_store(self.store_uri)

    def process(self, batch: Sequence[tuple[str, int]]) -> Iterator[beam.pvalue.TaggedOutput]:
        for letter in dead_letter.each(self.dead, batch, self._book):
            yield beam.pvalue.TaggedOutput(ERRORS, letter)

    def _book(self, batch: Sequence[tuple[str, int]]) -> None:
        states = read_domains(self.store, (d for d, _ in batch))
        self.store.mutate(
            TABLE,
            [
                Mutation.set(
                    d.encode(),
                    {USAGE: json.dumps(book_usage(states[d], n, self.round_no, self.now, self.period)).encode()},
                )
                for d, n in batch
            ],
        )

    def teardown(self) -> None:
        self.store.close()


class CountDomainUsage(beam.PTransform):
    """``FetchResult`` → each registered domain's pages used this budget period, booked in
    the store (once per round, whatever reruns)."""

    def __init__(self, store_uri: str, round_no: int, now: float, period: float) -> None:
        super().__init__()
        self.store_uri = store_uri
        self.round_no = round_no
        self.now = now
        self.period = period

    def expand(self, results: beam.PCollection) -> beam.PCollection:
        counted = results | "Pages per domain in a bundle" >> beam.ParDo(_CountFetchesFn()).with_outputs(
            ERRORS, main="counts"
        )
        booked = (
            counted.counts
            | "Pages per domain" >> beam.CombinePerKey(sum)
            | "Batch domains" >> beam.BatchElements(min_batch_size=16, max_batch_size=1000)
            | "Book pages used"
            >> beam.ParDo(_BookUsageFn(self.store_uri, self.round_no, self.now, self.period)).with_outputs(
                ERRORS, main="booked"
            )
        )
        collect(counted[ERRORS])
        collect(booked[ERRORS])
        return booked.booked


# --- linking domains ----------------------------------------------------------------------------


def linked_domains(page: ParsedPage) -> tuple[str, set[str]]:
    """``(the page's registered domain, the other registered domains it links to)``.

    Only links the crawler would follow count (nofollow is no endorsement), canonical hints
    do not, and a page recorded as a copy of another counts nothing (copying pages must not
    buy reputation).
    """
    src = domain_of(page.fetch.entry.host)
    out: set[str] = set()
    if getattr(page, "duplicate_of", None):
        return src, out
    for url, _fp, kind, host, _lastmod in follow_rows(page.links, page.meta_nofollow):
        if kind == "canonical":
            continue
        try:
            dst = domain_of(host or host_of(url))
        except ValueError:
            continue
        if dst != src:
            out.add(dst)
    return src, out


class _LinkersFn(beam.DoFn):
    """Per bundle (its pages a batch per call): each linked domain's set of linking domains
    (one element per domain),
    passed on whenever the sets hold ``max_pairs`` (linked, linking) pairs: the local runners'
    bundle is the whole round, and the union per domain after the shuffle does not care how
    a domain's linkers were split."""

    def __init__(self, max_pairs: int = LINKER_PAIRS) -> None:
        self.dead = Outlet("budgets")
        self.max_pairs = max_pairs

    def start_bundle(self) -> None:
        self.linkers: dict[str, set[str]] = {}
        self.pairs = 0

    def process(self, batch: PageBatch) -> Iterator[Any]:
        for page in batch.pages:
            if page.fetch.outcome != "fetched" or not page.links:
                continue
            try:
                self.dead.check(page)
                src, targets = linked_domains(page)
            except Exception as exc:  # this page's letter; the batch's others go on
                yield self.dead.tagged(exc, page)
                continue
            for dst in targets:
                linking = self.linkers.setdefault(dst, set())
                if src not in linking:
                    linking.add(src)
                    self.pairs += 1
            if self.pairs >= self.max_pairs:
                yield from self._take()

    def finish_bundle(self) -> Iterator[WindowedValue]:
        for kv in self._take():
            yield GlobalWindows.windowed_value(kv)

    def _take(self) -> list[tuple[str, list[str]]]:
        out = [(dst, sorted(srcs)) for dst, srcs in self.linkers.items()]
        self.linkers = {}
        self.pairs = 0
        return out


class _MergeLinkersFn(beam.DoFn):
    """Merges a batch of domains' new linkers into their stored counts (one read, one write)."""

    def __init__(self, store_uri: str) -> None:
        self.store_uri = store_uri
        self.updated = Metrics.counter("budgets", "linker_counts_updated")
        self.dead = Outlet("budgets")

    def setup(self) -> None:
        self.store = open_store(self.store_uri)

    def process(self, batch: Sequence[tuple[str, list[str]]]) -> Iterator[beam.pvalue.TaggedOutput]:
        # A domain the store refuses as a key is set aside alone (a union: redoing is harmless).
        for letter in dead_letter.each(self.dead, batch, self._merge):
            yield beam.pvalue.TaggedOutput(ERRORS, letter)

    def _merge(self, batch: Sequence[tuple[str, list[str]]]) -> None:
        states = read_domains(self.store, (d for d, _ in batch))
        writes = []
        for domain, linkers in batch:
            sketch = states[domain].linkers
            before = sketch.to_bytes()
            for src in linkers:
                sketch.add(src)
            after = sketch.to_bytes()
            if after != before:
                writes.append(Mutation.set(domain.encode(), {LINKERS: after}))
        if writes:
            self.store.mutate(TABLE, writes)
            self.updated.inc(len(writes))

    def teardown(self) -> None:
        self.store.close()


class CountLinkingDomains(beam.PTransform):
    """``PageBatch`` → each linked domain's count of distinct linking domains, merged into
    the store (a union: idempotent)."""

    def __init__(self, store_uri: str) -> None:
        super().__init__()
        self.store_uri = store_uri

    def expand(self, pages: beam.PCollection) -> beam.PCollection:
        found = pages | "Linking domains in a bundle" >> beam.ParDo(_LinkersFn()).with_outputs(ERRORS, main="linkers")
        merged = (
            found.linkers
            | "Group by linked domain" >> beam.GroupByKey()
            | "Union per domain" >> beam.MapTuple(lambda domain, groups: (domain, sorted(set().union(*groups))))
            | "Batch domains" >> beam.BatchElements(min_batch_size=16, max_batch_size=1000)
            | "Merge linking-domain counts"
            >> beam.ParDo(_MergeLinkersFn(self.store_uri)).with_outputs(ERRORS, main="merged")
        )
        collect(found[ERRORS])
        collect(merged[ERRORS])
        return merged.merged
