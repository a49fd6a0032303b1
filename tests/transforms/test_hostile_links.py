"""Hostile link sets through the real parse, URL-seen and budget stages (issue #16).

A page linking to ``http://[::1]:PORT/`` once failed every round: its empty registered domain
became an empty ``domains`` row key. Here hypothesis drives the hostile grammar of
tests/hostile_inputs.py: 5 examples of 40 pages with 50 links each, plus a hostile
``Location`` per page, are 10,000+ URLs as pages write them (IPv6 and IPv4 forms, IDN and
invalid punycode, ports, userinfo, NUL, undecodable bytes, backslashes). They go through
``parse_fetch`` (the parse stage's pure function) and then, on TestPipeline and the embedded
store, through ExtractCandidates → QueueUnseenUrls, CountLinkingDomains, CountDomainUsage and
ApplyBudgets. No exception escapes, every accepted URL is queued once, and every stored key is
a valid one.
"""

from __future__ import annotations

import dataclasses
import html

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import HealthCheck, given, settings

import hostile_inputs as hostile
from beamcrawl.core.policy.budget_rules import DAY, BudgetRules
from beamcrawl.core.urls.hostkeys import domain_of, host_key
from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.core.urls.urlnorm import InvalidURL, fingerprint, host_of, normalize
from beamcrawl.schemas.records import FetchResult, FrontierEntry, PageBatch, packed_by_host
from beamcrawl.stores.base import open_store
from beamcrawl.transforms.budgets import ApplyBudgets, CountDomainUsage, CountLinkingDomains, linked_domains
from beamcrawl.transforms.dead_letter import collected
from beamcrawl.transforms.parquet_io import link_edge_columns
from beamcrawl.transforms.parse import parse_fetch
from beamcrawl.transforms.url_seen import ExtractCandidates, QueueUnseenUrls, page_candidates

NOW = 1_800_000_000.0
PAGES, LINKS = 40, 50
# Small budgets and caps, so that deferrals (new frontier rows) happen too.
RULES = BudgetRules(base=3, per_domain=1, cap=10, seed_credit=0, new_hosts_per_round=2, max_hosts=5)
SOURCES = ["http://[::1]:8080/a/b", "http://[2001:db8::1]/", "http://127.0.0.1/x", "http://xn--bcher-kva.example/"]


def _fetched(url: str, hrefs: list[str], location: str, n: int) -> list[FetchResult]:
    entry = FrontierEntry(url=url, fp=fingerprint(url), host=host_of(url), due_ms=0)
    anchors = "".join(f'<a href="{html.escape(h, quote=True)}">{n}</a>' for h in hrefs)
    body = f"<html><head><title>{n}</title></head><body>{anchors}</body></html>".encode("utf-8", "surrogatepass")
    page = FetchResult(
        entry=entry, outcome="fetched", url=url, status=200,
        response_headers=[("Content-Type", "text/html")], body=body, raw_body=body,
    )  # fmt: skip
    moved_url = f"{url.rstrip('/')}/moved{n}"
    moved = FetchResult(
        entry=FrontierEntry(url=moved_url, fp=fingerprint(moved_url), host=entry.host, due_ms=0),
        outcome="fetched", url=moved_url, status=301, response_headers=[("Location", location)],
    )  # fmt: skip
    return [page, moved]


def _source_urls(rng) -> list[str]:
    """Page URLs: the IP-literal and IDN hosts above, then hostile URLs the crawl accepts."""
    urls = list(SOURCES)
    while len(urls) < PAGES:
        try:
            urls.append(normalize(hostile.hostile_url(rng), "http://base.example/"))
        except InvalidURL:
            continue
    return urls


@pytest.mark.slow  # five TestPipeline runs of 2,000+ URLs each
@settings(
    max_examples=5, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
@given(rng=hostile.seeded)
def test_hostile_link_sets_pass_url_seen_and_budgets(tmp_path_factory, rng) -> None:
    tmp = tmp_path_factory.mktemp("hostile")
    uri = f"sqlite:///{tmp}/store.sqlite"
    fetches = []
    for n, url in enumerate(_source_urls(rng)):
        fetches += _fetched(url, hostile.hostile_urls(rng, LINKS), hostile.hostile_url(rng), n)
    pages = [parse_fetch(f, "beamcrawl") for f in fetches]
    assert sum(len(p.links) for p in pages) > PAGES * LINKS / 4  # enough of them are accepted
    candidates = [c for p in pages for c in page_candidates(p)]
    # The due rows of the budget stage: one per accepted link, keyed by its slot.
    due = {c.fp: FrontierEntry(url=c.url, fp=c.fp, host=c.host, due_ms=1000, priority=0.5) for c in candidates}

    p = TestPipeline(runner="FnApiRunner")
    parsed = p | "pages" >> beam.Create(pages)
    batches = p | "batches" >> beam.Create([PageBatch(pages[i : i + 7]) for i in range(0, len(pages), 7)])
    _ = batches | ExtractCandidates() | QueueUnseenUrls(uri, bits=2, now_ms=1000)
    _ = batches | CountLinkingDomains(uri)
    _ = parsed | beam.Map(lambda page: page.fetch) | CountDomainUsage(uri, 1, NOW, DAY)
    _ = (
        p
        | "due" >> beam.Create(list(packed_by_host(due.values())))
        | ApplyBudgets(uri, RULES, NOW, RoundOutputs(str(tmp / "out"), 1))
    )
    assert_that(collected(p), equal_to([]), label="No dead letters")
    p.run().wait_until_finish()

    with open_store(uri) as store:
        frontier = [FrontierEntry.from_cells(c) for _, c in store.read_range("frontier")]
        domains = [k.decode() for k, _ in store.read_range("domains", keys_only=True)]
    # Every accepted link queued (and a deferral is a second row of the same URL), none other.
    assert {e.fp for e in frontier} == set(due)
    assert all(e.host == host_of(e.url) and host_key(e.host) for e in frontier)
    # Every domain row is the registered domain of a host the pages named: never empty.
    named = {domain_of(f.entry.host) for f in fetches} | {domain_of(c.host) for c in candidates}
    assert domains and set(domains) <= named and all(domains)
    assert "[::1]" in domains and "[2001:db8::1]" in domains


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=hostile.seeded)
def test_a_links_host_found_at_parse_is_the_one_each_stage_would_find(rng) -> None:
    """Parse sets each link's slot once (``Link.host``); candidates, linking domains and the
    link-edge columns give what they gave when each found it again from the URL."""
    fetches = []
    for n, url in enumerate(_source_urls(rng)[:8]):
        fetches += _fetched(url, hostile.hostile_urls(rng, LINKS), hostile.hostile_url(rng), n)
    pages = [parse_fetch(f, "beamcrawl") for f in fetches]
    assert sum(1 for p in pages for link in p.links if link.host) > 8 * LINKS / 4
    for page in pages:
        for link in page.links:
            try:
                assert link.host == host_of(link.url)
            except InvalidURL:
                assert link.host == ""
        blank = dataclasses.replace(page, links=[dataclasses.replace(link, host="") for link in page.links])
        assert page_candidates(page) == page_candidates(blank)
        assert linked_domains(page) == linked_domains(blank)
        assert link_edge_columns(page) == link_edge_columns(blank)


# --- the IPv6 failures, one by one ------------------------------------------------------


def _linking(src: str, *dst: str):
    from beamcrawl.schemas.records import Link, ParsedPage

    entry = FrontierEntry(url=src, fp=fingerprint(src), host=host_of(src), due_ms=0)
    page = ParsedPage(fetch=FetchResult(entry=entry, outcome="fetched", url=src, status=200))
    page.links = [Link(url=normalize(u), fp=fingerprint(normalize(u))) for u in dst]
    return page


def test_ipv6_links_record_their_linking_domains(tmp_path) -> None:
    """Links to IPv6 literals failed "Merge linking-domain counts" with an empty row key, every
    round; two addresses under 2001: shared one domain."""
    uri = f"sqlite:///{tmp_path}/store.sqlite"
    pages = [
        _linking("http://a.example.com/", "http://[::1]:8080/", "http://[2001:db8::1]/", "http://[2001:4860::8888]/x"),
        _linking("http://[::1]:8080/", "http://b.example.org/", "http://[2001:db8::1]:81/"),
    ]
    with TestPipeline(runner="FnApiRunner") as p:
        _ = p | beam.Create([PageBatch(pages)]) | CountLinkingDomains(uri)
        assert_that(collected(p), equal_to([]), label="No dead letters")
    from beamcrawl.transforms.budgets import read_domains

    with open_store(uri) as store:
        keys = sorted(k.decode() for k, _ in store.read_range("domains", keys_only=True))
        states = read_domains(store, keys)
    assert keys == sorted(["[::1]", "[2001:db8::1]", "[2001:4860::8888]", "example.org"])
    assert states["[2001:db8::1]"].linkers.count() == 2  # example.com and [::1]
    assert states["[2001:4860::8888]"].linkers.count() == 1
    assert states["example.org"].linkers.count() == 1  # from [::1]


def test_a_policy_on_a_bare_ipv6_host_reaches_its_port_slots(tmp_path) -> None:
    """`hosts set-policy [::1]` is stored under policy_key; select reads a slot's policy under
    the slot or its host_key. The slot [::1]:8080 used to be looked up under "::1"."""
    from beamcrawl.cli.hosts import policy_key
    from beamcrawl.schemas.records import HostPolicy
    from beamcrawl.stores.base import Mutation
    from beamcrawl.transforms.select import _ReadHostRowsFn

    uri = f"sqlite:///{tmp_path}/store.sqlite"
    with open_store(uri) as store:
        for host, blocked in (("::1", True), ("[2001:db8::1]:8443", True)):
            key = policy_key(host)
            store.mutate("policies", [Mutation.set(key.encode(), HostPolicy(host=key, blocked=blocked).to_cells())])
    fn = _ReadHostRowsFn(uri)
    fn.setup()
    try:
        out = list(fn.process(["[::1]:8080", "[::1]", "[2001:db8::1]", "[2001:db8::1]:8443", "[::2]:8080"]))
    finally:
        fn.teardown()
    policies = {o.value[0]: o.value[1] for o in out if getattr(o, "tag", None) == "policies"}
    assert sorted(policies) == ["[2001:db8::1]:8443", "[::1]", "[::1]:8080"]  # a port's policy is its own
    assert all(p.blocked for p in policies.values())
