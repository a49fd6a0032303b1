"""Tests for beamcrawl.core.policy.budget_rules: STAR budgets, BEAST deferral, containment caps."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.policy.budget_rules import (
    DAY,
    BudgetRules,
    LinkingDomains,
    cap_new_pages,
    defer_until,
    domain_budget,
    new_hosts_cap,
    period_usage,
    plan_budget,
)

# --- STAR --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("linkers", "expected"),
    [(0, 10), (1, 20), (99, 1000), (999, 10_000), (5000, 10_000), (-3, 10)],
)
def test_domain_budget_irlbot_numbers(linkers: int, expected: int) -> None:
    """IRLbot's range: 10 pages for most domains, up to 10,000 for the best linked."""
    assert domain_budget(linkers, base=10, per_domain=10, cap=10_000) == expected


def test_domain_budget_cap_below_base_means_base() -> None:
    assert domain_budget(50, base=10, per_domain=1, cap=5) == 10


@given(st.integers(0, 10**7), st.integers(0, 10**7), st.integers(0, 1000), st.integers(0, 10**6))
def test_property_budget_monotone_and_bounded(a: int, b: int, per: int, base: int) -> None:
    cap = base + 10**6
    lo, hi = sorted((a, b))
    assert base <= domain_budget(lo, base, per, cap) <= domain_budget(hi, base, per, cap) <= cap


def test_rules_budget_and_seed_credit() -> None:
    rules = BudgetRules()
    assert rules.budget(0) == 100
    assert rules.budget(3) == 130
    assert rules.budget(0, seeded=True) == 100 + 10 * 100
    assert rules.budget(10**9) == rules.cap


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base": -1},
        {"cap": 5, "base": 10},
        {"period": 0},
        {"defer_base": 0},
        {"defer_base": 10, "defer_max": 5},
    ],
)
def test_bad_rules_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        BudgetRules(**kwargs)


# --- BEAST ---------------------------------------------------------------------------------------


def test_defer_grows_then_stops_growing() -> None:
    now = 1_000_000.0
    waits = [defer_until(now, k, base=3600, ceiling=8 * 3600) - now for k in range(8)]
    assert waits == [3600, 7200, 14400, 28800, 28800, 28800, 28800, 28800]
    assert defer_until(now, 10**9, base=1, ceiling=60) == now + 60  # no overflow, no loop
    assert defer_until(now, -5, base=10) == now + 10


@given(st.integers(0, 200), st.integers(0, 2**64 - 1))
def test_property_defer_bounded_and_in_the_future(times: int, key: int) -> None:
    now = 1.7e9
    due = defer_until(now, times, base=DAY, ceiling=30 * DAY, spread_key=key)
    assert now + DAY <= due <= now + 30 * DAY * 1.25
    assert due >= defer_until(now, max(0, times - 1), base=DAY, ceiling=30 * DAY)


def test_spread_spreads() -> None:
    dues = {round(defer_until(0.0, 0, base=100_000, spread_key=k)) for k in random.Random(1).sample(range(2**40), 200)}
    assert len(dues) > 190 and min(dues) >= 100_000 and max(dues) <= 125_000


def test_plan_budget_allows_best_first_and_defers_the_rest() -> None:
    queued = [(f"u{i}", i % 3) for i in range(10)]  # (url, times deferred before)
    plan = plan_budget(queued, used=6, budget=10, now=100.0, times_deferred=lambda item: item[1])
    assert plan.allowed == queued[:4]
    assert [item for item, _ in plan.deferred] == queued[4:]
    for item, due in plan.deferred:
        assert due == defer_until(100.0, item[1])


def test_plan_budget_over_budget_defers_all_and_custom_schedule() -> None:
    plan = plan_budget(["a", "b"], used=50, budget=10, now=0.0, defer=lambda now, k, item: now + 7)
    assert plan.allowed == [] and plan.deferred == [("a", 7), ("b", 7)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(), max_size=50), st.integers(-5, 60), st.integers(0, 60))
def test_property_never_drops(queued: list[int], used: int, budget: int) -> None:
    plan = plan_budget(queued, used, budget, now=0.0)
    assert plan.allowed + [item for item, _ in plan.deferred] == queued
    assert len(plan.allowed) <= max(0, budget - max(0, used))
    assert all(due > 0 for _, due in plan.deferred)


def test_period_usage_rolls_over_on_aligned_periods() -> None:
    assert period_usage(0.0, 0, now=DAY * 10 + 5, period=DAY) == (DAY * 10, 0)
    assert period_usage(DAY * 10, 42, now=DAY * 10 + 500, period=DAY) == (DAY * 10, 42)
    assert period_usage(DAY * 10, 42, now=DAY * 11, period=DAY) == (DAY * 11, 0)


# --- containment -------------------------------------------------------------------------------


def test_cap_new_pages_keeps_revisits() -> None:
    queued = ["new1", "old1", "new2", "new3", "old2", "new4"]
    kept, over = cap_new_pages(queued, lambda u: u.startswith("new"), cap=2)
    assert kept == ["new1", "old1", "new2", "old2"] and over == ["new3", "new4"]
    assert cap_new_pages(queued, lambda u: True, cap=0) == (queued, [])


def test_new_hosts_cap_contains_wildcard_dns() -> None:
    known = {"www.spam.example", "blog.spam.example"}
    candidates = (
        ["www.spam.example"] + [f"a{i}.spam.example" for i in range(100)] + ["blog.spam.example", "a1.spam.example"]
    )
    got = new_hosts_cap(candidates, known, per_round=5, max_hosts=50)
    assert got.admitted == ["www.spam.example"] + [f"a{i}.spam.example" for i in range(5)] + ["blog.spam.example"]
    assert got.new == [f"a{i}.spam.example" for i in range(5)]
    assert got.deferred == [f"a{i}.spam.example" for i in range(5, 100)]
    # the total cap: only 1 more name fits
    full = new_hosts_cap(["x.d", "y.d"], {f"h{i}.d" for i in range(9)}, per_round=5, max_hosts=10)
    assert full.new == ["x.d"] and full.deferred == ["y.d"]
    over = new_hosts_cap(["x.d"], {f"h{i}.d" for i in range(12)}, per_round=5, max_hosts=10)
    assert over.new == [] and over.deferred == ["x.d"]
    assert new_hosts_cap(["x.d", "y.d"], set(), per_round=0, max_hosts=0).new == ["x.d", "y.d"]


def test_wildcard_trap_simulation_stays_bounded() -> None:
    """Rounds of a wildcard-DNS trap that links to 50 fresh host names per crawled host: the
    known set never exceeds max_hosts, and every name not admitted is deferred, not lost."""
    known: set[str] = set()
    pending = ["h0.trap.example"]
    deferred_total = 0
    serial = 1
    for _ in range(30):
        got = new_hosts_cap(pending, known, per_round=20, max_hosts=200)
        known.update(got.new)
        deferred_total = len(got.deferred)
        fresh = []
        for _host in got.new:
            fresh.extend(f"h{serial + i}.trap.example" for i in range(50))
            serial += 50
        pending = got.deferred + fresh
        assert len(known) <= 200
    assert len(known) == 200 and deferred_total > 0


# --- linking domains ----------------------------------------------------------------------------


def test_linking_domains_exact_when_small_and_idempotent() -> None:
    s = LinkingDomains()
    for d in ["a.com", "b.org", "a.com", "c.net"]:
        s.add(d)
    assert s.count() == 3
    t = LinkingDomains.from_bytes(s.to_bytes())
    assert t == s
    t.merge(s)
    t.merge(s)
    assert t.count() == 3 and t.to_bytes() == s.to_bytes()
    assert LinkingDomains.from_bytes(None).count() == 0 and LinkingDomains.from_bytes(b"").count() == 0


@pytest.mark.parametrize("n", [65, 200, 1000, 20_000])
def test_linking_domains_estimate_is_close(n: int) -> None:
    s = LinkingDomains()
    for i in range(n):
        s.add(f"site{i}.example")
    assert abs(s.count() - n) <= max(3, 0.1 * n), s.count()
    assert len(s.to_bytes()) <= 1025


def test_linking_domains_merge_is_a_union() -> None:
    a, b, both = LinkingDomains(), LinkingDomains(), LinkingDomains()
    for i in range(3000):
        (a if i % 2 else b).add(f"d{i}.example")
        both.add(f"d{i}.example")
    small = LinkingDomains()
    small.add("d1.example")
    a.merge(b)
    a.merge(small)  # already counted
    assert a == both
    small.merge(both)  # an exact set merged with a sketch becomes the sketch
    assert small == both


def test_linking_domains_corrupt_bytes_refused() -> None:
    for bad in (b"Xabc", b"E1234567", b"H" + bytes(10), b"H" + bytes([99]) * 1024):
        with pytest.raises(ValueError):
            LinkingDomains.from_bytes(bad)


def test_simweb_calendar_trap_is_contained_by_the_budget_not_by_shape() -> None:
    """The simweb's calendar trap (``/cal/YYYY/MM.html``, next and previous month for ever)
    passes every shape rule; the domain budget is what bounds it. Over ten periods the trap
    host gets at most its budget each period, and every discovered URL is either fetched or
    still queued (deferred), never lost."""
    from beamcrawl.core.urls import urlshape
    from beamcrawl.core.urls.urlnorm import host_of, normalize
    from beamcrawl.simweb.site import TRAP_ENTRY, SimWeb

    web = SimWeb(hosts=30, seed=3)
    hi = next(i for i in range(30) if web.host(i).trap)
    rules = BudgetRules(base=25, per_domain=0, defer_base=DAY, defer_max=4 * DAY)
    start = normalize(web.url(hi, TRAP_ENTRY))
    frontier: dict[str, tuple[float, int]] = {start: (0.0, 0)}  # url -> (due, times deferred)
    seen = {start}
    fetched: list[str] = []
    per_period: dict[float, int] = {}
    period_start, used = 0.0, 0
    deferrals = 0
    for round_no in range(10 * 24):  # hourly rounds for ten days
        now = round_no * 3600.0
        period_start, used = period_usage(period_start, used, now, rules.period)
        due = sorted((u for u, (at, _) in frontier.items() if at <= now), key=lambda u: (frontier[u][0], u))
        plan = plan_budget(
            due,
            used=used,
            budget=rules.budget(0),
            now=now,
            times_deferred=lambda u: frontier[u][1],
            defer=lambda n, k, u: rules.defer(n, k),
        )
        for url, until in plan.deferred:
            frontier[url] = (until, frontier[url][1] + 1)
            deferrals += 1
        for url in plan.allowed[:3]:  # the host's politeness allows a few fetches a round
            del frontier[url]
            fetched.append(url)
            used += 1
            per_period[period_start] = per_period.get(period_start, 0) + 1
            path = url.split(f":{web.port}", 1)[1] if f":{web.port}" in url else url.split(host_of(url), 1)[1]
            year, month = (int(x) for x in path[len("/cal/") : -len(".html")].split("/"))
            for link in web.cal_links(hi, year, month):
                target = normalize(link)
                assert urlshape.check(target) is None  # shape rules cannot see this trap
                assert host_of(target) == host_of(start)
                if target not in seen:
                    seen.add(target)
                    frontier[target] = (now, 0)
    assert max(per_period.values()) == 25  # the budget, reached and never exceeded
    assert len(per_period) == 10
    assert set(fetched) | set(frontier) == seen and not set(fetched) & set(frontier)
    assert deferrals > 0  # the trap hit the budget and was set aside, not deleted
