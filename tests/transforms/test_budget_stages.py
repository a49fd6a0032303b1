"""The budget stages: pure decisions first, then the transforms against a real store.

What matters (docs/ARCHITECTURE.md §3): a domain gets at most its budget per period, new host names are
capped, and nothing is ever deleted: a deferred URL is a new frontier row written before its
old row is staged for deletion at commit, due again at a growing interval.
"""

from __future__ import annotations

import dataclasses
import json

import apache_beam as beam
from hypothesis import given, settings
from hypothesis import strategies as st
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamcrawl.core.policy.budget_rules import DAY, BudgetRules, LinkingDomains
from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.core.urls.urlnorm import fingerprint
from beamcrawl.schemas.due_rows import DueRows
from beamcrawl.schemas.records import FetchResult, FrontierEntry, Link, PageBatch, ParsedPage, packed_by_host
from beamcrawl.stores.base import Mutation, open_store
from beamcrawl.transforms import budgets
from beamcrawl.transforms.budgets import (
    HOSTS,
    LINKERS,
    SEEDED,
    USAGE,
    ApplyBudgets,
    CountDomainUsage,
    CountLinkingDomains,
    DomainState,
    book_usage,
    budget_domain,
    defer_due,
    domain_of,
    linked_domains,
    read_domains,
)
from beamcrawl.state.domains import credit_seed_domains
from beamcrawl.transforms.dead_letter import collected

NOW = 1_800_000_000.0 + 3600.0  # an hour into a budget period
RULES = BudgetRules(base=5, per_domain=2, cap=50, seed_credit=10, new_hosts_per_round=2, max_hosts=3)


def entry(url: str, priority: float = 0.5, deferrals: int = 0, due_ms: int = 1000) -> FrontierEntry:
    host = url.split("/")[2]
    return FrontierEntry(url=url, fp=fingerprint(url), host=host, due_ms=due_ms, priority=priority, deferrals=deferrals)


def test_domain_of_a_slot_key():
    assert domain_of("blog.example.co.uk:8080") == "example.co.uk"
    assert domain_of("127.0.0.1:80") == "127.0.0.1"


def test_over_budget_urls_are_deferred_best_first_never_dropped():
    entries = [entry(f"http://a.example.com/{i}", priority=1 - i / 100) for i in range(12)]
    state = DomainState("example.com", used=2, period=NOW - 3600)
    decision = budget_domain(state, reversed(entries), RULES, NOW)
    assert decision.budget == 5 and decision.used == 2
    assert decision.allowed == entries[:3]  # room for 5 - 2, the best ones
    assert [e for e, _ in decision.deferred] == entries[3:] and decision.over_budget == 9
    # Due when the budget refills (the next interval), spread over a quarter of it.
    anchor = NOW // RULES.defer_base * RULES.defer_base
    for _entry, due in decision.deferred:
        assert NOW < anchor + RULES.defer_base <= due <= anchor + RULES.defer_base * 1.25


def test_reputation_and_seed_credit_raise_the_budget():
    linkers = LinkingDomains()
    for d in ("x.org", "y.net", "z.io"):
        linkers.add(d)
    state = DomainState("example.com", linkers=linkers, seeded=True)
    entries = [entry(f"http://example.com/{i}") for i in range(100)]
    decision = budget_domain(state, entries, RULES, NOW)
    assert decision.budget == 5 + 2 * (3 + 10) and len(decision.allowed) == 31


def test_usage_from_an_earlier_period_does_not_count():
    state = DomainState("example.com", used=500, period=NOW - 2 * DAY)
    decision = budget_domain(state, [entry("http://example.com/a")], RULES, NOW)
    assert decision.used == 0 and len(decision.allowed) == 1


def test_deferral_grows_and_a_rerun_writes_the_same_row():
    e0 = entry("http://example.com/x")
    first = defer_due(RULES, NOW, e0)
    assert defer_due(RULES, NOW + 600, e0) == first  # a rerun ten minutes later: same due time
    again = defer_due(RULES, NOW, dataclasses.replace(e0, deferrals=3))
    assert again - NOW >= 7 * RULES.defer_base  # 2^3 intervals from the interval's start
    assert first > NOW


def test_new_host_names_are_capped_per_round_and_in_all():
    known = {"www.spam.example"}
    entries = [entry(f"http://h{i}.spam.example/", priority=1 - i / 100) for i in range(6)]
    entries.append(entry("http://www.spam.example/", priority=0.1))
    state = DomainState("spam.example", hosts=known)
    decision = budget_domain(state, entries, dataclasses.replace(RULES, base=50), NOW)
    assert decision.new_hosts == ["h0.spam.example", "h1.spam.example"]  # 2 per round
    assert sorted(e.host for e in decision.allowed) == ["h0.spam.example", "h1.spam.example", "www.spam.example"]
    assert sorted(e.host for e, _ in decision.deferred) == [f"h{i}.spam.example" for i in range(2, 6)]
    assert decision.over_budget == 0
    full = DomainState("spam.example", hosts={"a.spam.example", "b.spam.example", "c.spam.example"})
    assert budget_domain(full, entries, RULES, NOW).new_hosts == []  # max_hosts reached


def test_the_operators_hosts_are_exempt_from_the_new_host_caps():
    """33 seed hosts and 2 submitted ones under one domain, with 2 new hosts a round and 3
    in all: every one is admitted (and becomes known); discovered names stay capped."""
    seeds = [dataclasses.replace(entry(f"http://d{i}.uni.example/"), source="seed") for i in range(33)]
    submitted = [dataclasses.replace(entry(f"http://s{i}.uni.example/"), source="submit") for i in range(2)]
    found = [entry(f"http://w{i}.uni.example/", priority=0.9) for i in range(5)]
    rules = dataclasses.replace(RULES, base=50)
    decision = budget_domain(DomainState("uni.example"), [*seeds, *submitted, *found], rules, NOW)
    allowed = {e.host for e in decision.allowed}
    assert {e.host for e in seeds + submitted} <= allowed
    assert not [e for e, _ in decision.deferred if e.source in ("seed", "submit")]
    assert set(decision.new_hosts) == {e.host for e in seeds + submitted}
    # The discovered names: the total cap (3) is already used up by the operator's hosts.
    assert {e.host for e, _ in decision.deferred} == {e.host for e in found}


def test_the_page_budget_still_applies_to_the_operators_urls():
    seeds = [dataclasses.replace(entry(f"http://d{i}.uni.example/"), source="seed") for i in range(8)]
    decision = budget_domain(
        DomainState("uni.example"), seeds, dataclasses.replace(RULES, new_hosts_per_round=0, max_hosts=0), NOW
    )
    assert len(decision.allowed) == RULES.base and decision.over_budget == 8 - RULES.base


def test_book_usage_is_idempotent_per_round():
    state = DomainState("example.com")
    cell = book_usage(state, 7, round_no=3, now=NOW, period=DAY)
    assert cell["used"] == 7
    state = DomainState("example.com", period=cell["period"], used=cell["used"], round=3, before=cell["before"])
    assert book_usage(state, 9, round_no=3, now=NOW, period=DAY)["used"] == 9  # rerun of round 3
    assert book_usage(state, 4, round_no=4, now=NOW, period=DAY)["used"] == 11
    assert book_usage(state, 4, round_no=4, now=NOW + DAY, period=DAY)["used"] == 4  # a new period


def test_linked_domains_counts_followed_links_to_other_domains():
    src = FrontierEntry(url="http://www.a.com/", fp=1, host="www.a.com", due_ms=0)
    page = ParsedPage(fetch=FetchResult(entry=src, outcome="fetched", url=src.url, status=200))
    for url, kind, nofollow in [
        ("http://blog.a.com/x", "a", False),  # same domain
        ("http://b.org/", "a", False),
        ("http://c.net/", "a", True),  # nofollow: no endorsement
        ("http://d.io/", "canonical", False),
        ("http://e.de/", "redirect", False),
    ]:
        page.links.append(Link(url=url, fp=fingerprint(url), kind=kind, nofollow=nofollow))
    assert linked_domains(page) == ("a.com", {"b.org", "e.de"})
    page.duplicate_of = "http://elsewhere.com/"
    assert linked_domains(page) == ("a.com", set())


@settings(max_examples=60, deadline=None)
@given(
    pages=st.lists(st.tuples(st.integers(0, 12), st.lists(st.integers(0, 30), max_size=15)), max_size=40),
    max_pairs=st.integers(1, 40),
)
def test_linkers_pass_on_at_the_pair_budget_and_union_to_the_same_sets(pages, max_pairs):
    """A bundle's linkers, passed on whenever they hold ``max_pairs`` pairs: never more held
    than the budget plus one page's links, and their union per linked domain is what one
    pass over the whole bundle gives."""
    fn = budgets._LinkersFn(max_pairs)
    fn.start_bundle()
    out: list[tuple[str, list[str]]] = []
    want: dict[str, set[str]] = {}
    for src_no, targets in pages:
        src = FrontierEntry(url=f"http://www.s{src_no}.com/", fp=1, host=f"www.s{src_no}.com", due_ms=0)
        page = ParsedPage(fetch=FetchResult(entry=src, outcome="fetched", url=src.url, status=200))
        page.links = [Link(url=f"http://d{t}.org/", fp=t) for t in targets]
        for dst in linked_domains(page)[1]:
            want.setdefault(dst, set()).add(f"s{src_no}.com")
        out.extend(fn.process(PageBatch([page])))
        assert fn.pairs < max_pairs and fn.pairs == sum(len(v) for v in fn.linkers.values())
    out.extend(wv.value for wv in fn.finish_bundle())
    got: dict[str, set[str]] = {}
    for dst, srcs in out:
        assert srcs == sorted(set(srcs))
        got.setdefault(dst, set()).update(srcs)
    assert got == want
    if sum(map(len, want.values())) < max_pairs:  # within the budget: one element per linked domain, as before
        assert sorted(dst for dst, _ in out) == sorted(want)


def test_corrupt_cells_read_as_empty():
    state = DomainState.from_cells("x.com", {LINKERS: b"junk", USAGE: b"{", HOSTS: b"[", SEEDED: b"1"})
    assert state.linkers.count() == 0 and state.used == 0 and state.hosts == set() and state.seeded


# --- the transforms on a real store ---------------------------------------------------------------


def _counters(result, namespace: str) -> dict[str, int]:
    return {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace(namespace))["counters"]
    }


def test_apply_budgets_defers_in_the_store_and_stages_old_keys(tmp_path):
    store_uri = f"sqlite:///{tmp_path}/store.sqlite"
    outputs = RoundOutputs(str(tmp_path / "out"), 1)
    rules = dataclasses.replace(RULES, new_hosts_per_round=0, max_hosts=0)
    trap = [entry(f"http://cal.trap.com/cal/{i}.html", priority=1 - i / 100) for i in range(8)]
    normal = [entry(f"http://ok.org/{i}", priority=0.5) for i in range(3)]
    with open_store(store_uri) as store:
        store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for e in trap + normal])
        credit_seed_domains(store, ["seeded.net"])
        usage = json.dumps({"period": NOW - 3600, "used": 3, "round": 0, "before": 0}).encode()
        store.mutate("domains", [Mutation.set(b"trap.com", {USAGE: usage})])

    p = TestPipeline(runner="FnApiRunner")
    due = p | beam.Create(list(packed_by_host(trap + normal)))
    allowed = due | ApplyBudgets(store_uri, rules, NOW, outputs)
    assert_that(allowed | beam.FlatMap(lambda he: [e.url for e in he[1]]), equal_to([e.url for e in trap[:2] + normal]))
    assert_that(collected(p), equal_to([]), label="No dead letters")
    result = p.run()
    result.wait_until_finish()
    counters = _counters(result, "budgets")
    assert counters["urls_over_budget"] == 6 and counters["domains_over_budget"] == 1

    with open_store(store_uri) as store:
        rows = [FrontierEntry.from_cells(c) for _, c in store.read_range("frontier")]
    old = {e.key for e in trap + normal}
    later = [e for e in rows if e.key not in old]
    assert sorted(e.url for e in later) == sorted(e.url for e in trap[2:])
    assert all(e.deferrals == 1 and e.due_ms > NOW * 1000 for e in later)
    assert {e.key for e in rows} >= old  # nothing deleted before the commit
    staged = []
    for path in outputs.done_files():
        staged += [bytes.fromhex(k) for k in open(path).read().split()]
    assert sorted(staged) == sorted(e.key for e in trap[2:])


def test_a_bundles_old_keys_leave_memory_a_chunk_at_a_time_into_one_staged_file(tmp_path, monkeypatch):
    """The old keys of deferred rows are written to the bundle's staged file as they come (a
    chunk at a time), and the file appears, holding each once, only when the bundle ends."""
    monkeypatch.setattr(budgets._BudgetFn, "DONE_CHUNK", 2)
    store_uri = f"sqlite:///{tmp_path}/store.sqlite"
    outputs = RoundOutputs(str(tmp_path / "out"), 1)
    rules = dataclasses.replace(RULES, new_hosts_per_round=0, max_hosts=0)
    traps = {
        d: [entry(f"http://cal.{d}/cal/{i}.html", priority=1 - i / 100) for i in range(8)] for d in ("a.com", "b.com")
    }
    usage = json.dumps({"period": NOW - 3600, "used": 3, "round": 0, "before": 0}).encode()
    with open_store(store_uri) as store:
        store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for es in traps.values() for e in es])
        store.mutate("domains", [Mutation.set(d.encode(), {USAGE: usage}) for d in traps])
    fn = budgets._BudgetFn(store_uri, rules, NOW, outputs)
    fn.setup()
    fn.start_bundle()
    allowed = set()
    for domain, entries in traps.items():
        out = list(fn.process([(domain, list(packed_by_host(entries)))]))
        allowed |= {e.key for _, rows in out for e in rows}
        assert fn.done == []  # written out, not held
    assert outputs.done_files() == []  # published only when the bundle ends
    fn.finish_bundle()
    fn.teardown()
    deferred = {e.key for es in traps.values() for e in es} - allowed
    assert all(any(e.key in deferred for e in es) for es in traps.values())  # each domain deferred some
    staged = [bytes.fromhex(k) for path in outputs.done_files() for k in open(path).read().split()]
    assert len(outputs.done_files()) == 1 and sorted(staged) == sorted(deferred)


def test_a_hosts_rows_all_allowed_pass_on_as_read_and_the_others_are_made_anew():
    read_a = DueRows.of_entries([entry(f"http://a.ok.org/{i}") for i in range(3)])
    b = [entry(f"http://b.ok.org/{i}", priority=1 - i / 10) for i in range(4)]
    read_b = DueRows.of_entries(b)
    out = dict(budgets._passed_on({"a.ok.org": [read_a], "b.ok.org": [read_b]}, list(read_a) + b[:2]))
    assert out["a.ok.org"] is read_a  # nothing decoded is encoded again
    assert type(out["b.ok.org"]) is DueRows and list(out["b.ok.org"]) == b[:2]
    assert dict(budgets._passed_on({"b.ok.org": [read_b]}, [])) == {}  # all deferred: nothing goes on


def test_a_due_row_that_does_not_decode_is_set_aside_and_its_domain_still_budgeted(tmp_path):
    """Due rows come as the select read them (DueRows: stored cells, decoded here); a row
    whose values do not decode is one dead letter with its key, the domain's others go on."""
    store_uri = f"sqlite:///{tmp_path}/store.sqlite"
    outputs = RoundOutputs(str(tmp_path / "out"), 1)
    rows = [entry(f"http://ok.org/{i}") for i in range(3)]
    broken = entry("http://ok.org/broken")
    broken.revisit = {"v": 1}
    raw = broken.to_cells()["r:json"].replace(b'{"v":1}', b'{"v":]}')
    due = DueRows.of_cells([rows[0].to_cells()["r:json"], raw] + [e.to_cells()["r:json"] for e in rows[1:]])

    p = TestPipeline(runner="FnApiRunner")
    allowed = p | beam.Create([("ok.org", due)]) | ApplyBudgets(store_uri, RULES, NOW, outputs)
    assert_that(
        allowed | beam.FlatMap(lambda he: [(he[0], type(he[1]).__name__, e.url) for e in he[1]]),
        equal_to([("ok.org", "DueRows", e.url) for e in rows]),
    )
    letters = collected(p) | beam.Map(lambda d: (d.stage, d.exception, d.key, d.host))
    assert_that(letters, equal_to([("budgets", "CellError", broken.key.hex(), "ok.org")]), label="One dead letter")
    p.run().wait_until_finish()


def test_usage_and_linking_domains_are_recorded_once_per_round(tmp_path):
    store_uri = f"sqlite:///{tmp_path}/store.sqlite"
    pages = []
    for i, host in enumerate(["a.com", "www.a.com", "b.org", "c.net"]):
        src = FrontierEntry(url=f"http://{host}/", fp=i + 1, host=host, due_ms=0)
        page = ParsedPage(fetch=FetchResult(entry=src, outcome="fetched", url=src.url, status=200))
        page.links.append(Link(url="http://target.io/x", fp=fingerprint("http://target.io/x")))
        pages.append(page)
    robots = FetchResult(
        entry=FrontierEntry(url="http://a.com/robots.txt", fp=0, host="a.com", due_ms=0, source="robots"),
        outcome="fetched",
        url="http://a.com/robots.txt",
        status=200,
    )
    for _attempt in range(2):  # the round, then its rerun after a crash
        p = TestPipeline(runner="FnApiRunner")
        _ = p | "pages" >> beam.Create([PageBatch(pages[:2]), PageBatch(pages[2:])]) | CountLinkingDomains(store_uri)
        _ = (
            p
            | "results" >> beam.Create([pg.fetch for pg in pages] + [robots])
            | CountDomainUsage(store_uri, 7, NOW, DAY)
        )
        assert_that(collected(p), equal_to([]), label="No dead letters")
        p.run().wait_until_finish()
    with open_store(store_uri) as store:
        states = read_domains(store, ["target.io", "a.com", "b.org"])
    assert states["target.io"].linkers.count() == 3  # a.com (twice), b.org, c.net
    assert states["a.com"].used == 2 and states["b.org"].used == 1  # robots.txt not counted


def test_domains_are_batched_by_their_due_urls_so_a_batch_decodes_a_bounded_number(tmp_path, monkeypatch):
    """A batch of domains holds at most ``BATCH_URLS`` due URLs (a bigger domain is a batch
    alone): the budgets decode a batch's URLs together, so its size bounds what they hold."""
    monkeypatch.setattr(budgets, "BATCH_URLS", 10)
    monkeypatch.setattr(budgets, "MIN_BATCH_URLS", 1)
    batches: list[list[str]] = []
    real_read = budgets.read_domains

    def recorded(store, domains):
        domains = list(domains)
        batches.append(domains)
        return real_read(store, domains)

    monkeypatch.setattr(budgets, "read_domains", recorded)
    store_uri = f"sqlite:///{tmp_path}/store.sqlite"
    outputs = RoundOutputs(str(tmp_path / "out"), 1)
    rules = dataclasses.replace(RULES, base=1000, cap=1000, new_hosts_per_round=0, max_hosts=0)
    # a domain over the bound first (Beam then flushes an empty batch before it) and one later
    sizes = {f"d{i}.org": n for i, n in enumerate([30, 3, 4, 1, 25, 2, 6, 9, 1, 12, 5])}
    entries = [entry(f"http://www.{d}/{j}") for d, n in sizes.items() for j in range(n)]
    with open_store(store_uri) as store:
        store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for e in entries])

    p = TestPipeline(runner="FnApiRunner")
    allowed = p | beam.Create(list(packed_by_host(entries))) | ApplyBudgets(store_uri, rules, NOW, outputs)
    assert_that(allowed | beam.FlatMap(lambda he: [e.url for e in he[1]]), equal_to([e.url for e in entries]))
    assert_that(collected(p), equal_to([]), label="No dead letters")
    p.run().wait_until_finish()

    assert sorted(d for batch in batches for d in batch) == sorted(sizes)  # each domain budgeted once
    assert len(batches) > 1, batches
    for batch in batches:
        assert sum(sizes[d] for d in batch) <= 10 or len(batch) == 1, batches


def test_a_domains_due_count_is_its_urls_whatever_holds_them():
    rows = list(packed_by_host([entry(f"http://a.org/{i}") for i in range(5)]))
    assert budgets.due_count(("a.org", rows)) == 5
    assert budgets.due_count(("b.org", [("b.org", [entry("http://b.org/1"), entry("http://b.org/2")])])) == 2
    assert budgets.due_count(("c.org", [("c.org", iter([entry("http://c.org/1")]))])) == 1  # no length: one
