"""Slot assignment: the plain planning function, then the transform on a real runner."""

from __future__ import annotations

import dataclasses

import apache_beam as beam
from hypothesis import given, settings
from hypothesis import strategies as st
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.core.policy import refusals
from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.schemas.records import FrontierEntry, HostPolicy, HostRecord
from beamcrawl.transforms.assign_slots import AssignSlots, fetch_shard, hold_reason, plan_host, shard_of
from beamcrawl.transforms.dead_letter import collected

NOW = 1_800_000_000.0
CFG = CrawlConfig(out="/tmp/x", store="sqlite:///tmp/x", min_delay=1.0, round_window=10.0, fetch_shards=8)


def entry(
    path: str, priority: float = 0.5, host: str = "a.com", due_ms: int = 1000, fp: int | None = None
) -> FrontierEntry:
    return FrontierEntry(
        url=f"http://{host}{path}",
        fp=fp if fp is not None else abs(hash(path)) % (1 << 60),
        host=host,
        due_ms=due_ms,
        priority=priority,
    )


def fresh_record(host: str = "a.com", robots: str = "User-agent: *\nDisallow: /private/\n", **kw) -> HostRecord:
    return HostRecord(
        host=host,
        robots=RobotsRules.parse(robots, "beamcrawl").to_dict(),
        robots_fetched_at=NOW - 60,
        **kw,
    )


def test_unknown_host_gets_robots_first_and_window_over_delay_slots():
    entries = [entry(f"/p/{i}.html") for i in range(50)]
    plan = plan_host("a.com", entries, None, None, CFG, NOW)
    assert plan is not None
    assert plan.fetch_robots
    # 10 s window / 1 s delay = 10 requests, one of them robots.txt
    assert len(plan.entries) == 9
    assert plan.shard == shard_of("a.com", 8)


def test_no_delay_at_all_plans_the_whole_queue_and_robots_first():
    """``--min-delay 0`` on a host that sets no Crawl-delay: no slot arithmetic divides by it."""
    cfg = dataclasses.replace(CFG, min_delay=0.0)
    entries = [entry(f"/p/{i}.html") for i in range(30)]
    plan = plan_host("a.com", entries, None, None, cfg, NOW)
    assert plan is not None and plan.fetch_robots and len(plan.entries) == 30
    plan = plan_host("a.com", entries, fresh_record(), None, dataclasses.replace(cfg, max_urls_per_host=7), NOW)
    assert plan is not None and not plan.fetch_robots and len(plan.entries) == 7


def test_stale_robots_is_fetched_again():
    record = fresh_record()
    record.robots_fetched_at = NOW - 25 * 3600
    plan = plan_host("a.com", [entry("/x")], record, None, CFG, NOW)
    assert plan is not None and plan.fetch_robots


def test_fresh_robots_filters_without_spending_slots_and_orders_by_priority():
    entries = [entry(f"/p/{i}", priority=i / 100) for i in range(30)] + [
        entry(f"/private/{i}", priority=1.0) for i in range(5)
    ]
    plan = plan_host("a.com", entries, fresh_record(), None, CFG, NOW)
    assert plan is not None and not plan.fetch_robots
    assert len(plan.entries) == 10
    assert [e.url for e in plan.entries] == [f"http://a.com/p/{i}" for i in range(29, 19, -1)]
    assert sorted(e.url for e in plan.disallowed) == sorted(f"http://a.com/private/{i}" for i in range(5))


def test_crawl_delay_and_host_delay_reduce_slots():
    record = fresh_record(robots="User-agent: *\nCrawl-delay: 2\n")
    plan = plan_host("a.com", [entry(f"/p/{i}") for i in range(20)], record, None, CFG, NOW)
    assert plan is not None and len(plan.entries) == 5 and plan.delay == 2.0
    slow = fresh_record(delay=5.0)
    plan = plan_host("a.com", [entry(f"/p/{i}") for i in range(20)], slow, None, CFG, NOW)
    assert plan is not None and len(plan.entries) == 2


def test_operator_policy_blocks_pauses_and_slows():
    entries = [entry(f"/p/{i}") for i in range(20)]
    assert plan_host("a.com", entries, fresh_record(), HostPolicy("a.com", blocked=True), CFG, NOW) is None
    assert plan_host("a.com", entries, fresh_record(), HostPolicy("a.com", pause_until=NOW + 60), CFG, NOW) is None
    plan = plan_host("a.com", entries, fresh_record(), HostPolicy("a.com", min_delay_ms=5000), CFG, NOW)
    assert plan is not None and plan.delay == 5.0 and len(plan.entries) == 2


def test_duplicate_frontier_rows_become_one_fetch():
    a = entry("/same", due_ms=1000, fp=42)
    b = entry("/same", due_ms=2000, fp=42)
    plan = plan_host("a.com", [b, a], fresh_record(), None, CFG, NOW)
    assert plan is not None and len(plan.entries) == 1
    assert plan.entries[0].due_ms == 1000
    assert plan.entries[0].also_keys == [b.key.hex()]


class TestAssignSlotsTransform:
    # Due work comes a list per host, and a host may come in more than one list.
    SAMPLE_DUE = [
        ("a.com", [entry(f"/p/{i}", host="a.com") for i in range(12)]),
        ("a.com", [entry(f"/p/{i}", host="a.com") for i in range(12, 25)]),
        ("b.org", [entry("/only", host="b.org")]),
        ("c.net", [entry("/blocked", host="c.net")]),
    ]

    def test_one_plan_per_host_with_polite_slots(self):
        with TestPipeline(runner="FnApiRunner") as p:
            due = p | "due" >> beam.Create(self.SAMPLE_DUE)
            hosts = p | "hosts" >> beam.Create([("a.com", fresh_record("a.com")), ("b.org", HostRecord("b.org"))])
            policies = p | "policies" >> beam.Create([("c.net", HostPolicy("c.net", blocked=True))])
            plans = {"due": due, "hosts": hosts, "policies": policies} | AssignSlots(CFG, NOW)
            summary = plans | beam.Map(lambda pl: (pl.host, len(pl.entries), pl.fetch_robots, pl.shard))
            assert_that(
                summary,
                equal_to(
                    [
                        ("a.com", 10, False, shard_of("a.com", 8)),
                        ("b.org", 1, True, shard_of("b.org", 8)),
                    ]
                ),
            )
            assert_that(collected(p), equal_to([]), label="No dead letters")


def test_shard_is_stable_and_in_range():
    assert shard_of("example.com", 16) == shard_of("example.com", 16)
    assert {shard_of(f"h{i}.com", 4) for i in range(200)} == {0, 1, 2, 3}


# --- the host's clock across rounds -------------------------------------------------------


def test_a_host_held_past_the_window_gets_no_slots():
    record = fresh_record(not_before=NOW + CFG.round_window + 1)
    assert plan_host("a.com", [entry("/x")], record, None, CFG, NOW) is None
    assert hold_reason("a.com", record, None, CFG, NOW) == "held"


def test_a_hold_ending_inside_the_window_leaves_only_the_rest_of_it():
    entries = [entry(f"/p/{i}") for i in range(20)]
    plan = plan_host("a.com", entries, fresh_record(not_before=NOW + 6.0), None, CFG, NOW)
    assert plan is not None and len(plan.entries) == 4  # 10 s window, first slot at +6 s, 1 s apart
    assert hold_reason("a.com", fresh_record(not_before=NOW + 6.0), None, CFG, NOW) is None


def test_the_last_response_and_delay_from_the_previous_round_count():
    # Answered 1 s ago with a 5 s delay: first slot at +4 s, one more fits in a 10 s window.
    record = fresh_record(delay=5.0, last_fetch_end=NOW - 1.0)
    plan = plan_host("a.com", [entry(f"/p/{i}") for i in range(20)], record, None, CFG, NOW)
    assert plan is not None and len(plan.entries) == 1
    late = fresh_record(delay=15.0, last_fetch_end=NOW - 1.0)
    assert plan_host("a.com", [entry("/x")], late, None, CFG, NOW) is None


# --- fetch shards: one owner per host and per server IP ------------------------------------


def test_with_an_ip_delay_hosts_on_one_ip_share_a_shard_and_unresolved_hosts_shard_by_name():
    per_ip = dataclasses.replace(CFG, ip_delay=0.5)
    shards = set()
    for i in range(30):
        record = fresh_record(host=f"h{i}.com", ip="192.0.2.7")
        plan = plan_host(f"h{i}.com", [entry("/x", host=f"h{i}.com")], record, None, per_ip, NOW)
        assert plan is not None
        shards.add(plan.shard)
    assert shards == {fetch_shard("any", HostRecord("any", ip="192.0.2.7"), 8, ip_delay=0.5)}
    unresolved = HostRecord("h1.com", ip=None, dns_error="dns: nx")
    assert fetch_shard("h1.com", unresolved, 8, ip_delay=0.5) == shard_of("h1.com", 8)
    assert fetch_shard("h1.com", None, 8, ip_delay=0.5) == shard_of("h1.com", 8)


def test_without_an_ip_delay_hosts_on_one_ip_spread_over_the_shards_by_name():
    # Nothing is counted per IP, so shared hosting (every simweb host is on 127.0.0.1) must
    # not put every host in one shard, one worker.
    assert CFG.ip_delay == 0
    shards = []
    for i in range(60):
        host = f"h{i}.com"
        plan = plan_host(host, [entry("/x", host=host)], fresh_record(host=host, ip="192.0.2.7"), None, CFG, NOW)
        assert plan is not None
        assert plan.shard == shard_of(host, 8)
        shards.append(plan.shard)
    assert set(shards) == set(range(8))
    # Still one owner per host: the same host always maps to the same shard.
    assert fetch_shard("h1.com", HostRecord("h1.com", ip="192.0.2.7"), 8) == shard_of("h1.com", 8)
    assert fetch_shard("h1.com", HostRecord("h1.com", ip="192.0.2.8"), 8) == shard_of("h1.com", 8)


# --- steering: blocklist and policies ---------------------------------------------------------


def test_blocklist_names_and_globs_match_host_and_port_slots():
    cfg = dataclasses.replace(CFG, blocklist=("*.bad.org", "evil.com"))
    for host in ("www.bad.org", "a.b.bad.org:8080", "evil.com", "evil.com:8443"):
        assert plan_host(host, [entry("/x", host=host)], None, None, cfg, NOW) is None, host
        assert hold_reason(host, None, None, cfg, NOW) == "blocklisted"
    for host in ("bad.org", "notevil.com", "evil.com.au"):
        assert plan_host(host, [entry("/x", host=host)], None, None, cfg, NOW) is not None, host


def test_an_expired_pause_no_longer_holds():
    policy = HostPolicy("a.com", pause_until=NOW - 1)
    assert plan_host("a.com", [entry("/x")], fresh_record(), policy, CFG, NOW) is not None
    assert hold_reason("a.com", fresh_record(), HostPolicy("a.com", pause_until=NOW + 1), CFG, NOW) == "paused"


# --- robots.txt: unreachable, fallback, token ---------------------------------------------------


def unreachable_record(
    fetched_ago: float, failing_for: float, good: str | None = None, good_age: float = 0.0
) -> HostRecord:
    record = HostRecord(
        host="a.com",
        robots=RobotsRules.from_fetch(503, b"", "beamcrawl").to_dict(),
        robots_fetched_at=NOW - fetched_ago,
        robots_failing_since=NOW - failing_for,
    )
    if good is not None:
        record.robots_good = RobotsRules.parse(good, "beamcrawl").to_dict()
        record.robots_good_at = NOW - good_age
    return record


def test_unreachable_robots_holds_the_host_until_its_retry_is_due():
    entries = [entry(f"/p/{i}") for i in range(5)]
    assert plan_host("a.com", entries, unreachable_record(60, 60), None, CFG, NOW) is None
    plan = plan_host("a.com", entries, unreachable_record(301, 301), None, CFG, NOW)
    assert plan is not None and plan.fetch_robots


def test_after_24h_unreachable_the_last_good_copy_filters_without_a_robots_fetch():
    record = unreachable_record(60, 25 * 3600, good="User-agent: *\nDisallow: /private/\n", good_age=26 * 3600)
    plan = plan_host("a.com", [entry("/ok"), entry("/private/no")], record, None, CFG, NOW)
    assert plan is not None and not plan.fetch_robots
    assert [e.url for e in plan.entries] == ["http://a.com/ok"]
    assert [e.url for e in plan.disallowed] == ["http://a.com/private/no"]


def test_cached_robots_are_read_for_the_crawls_token():
    text = "User-agent: beamcrawl\nAllow: /\n\nUser-agent: otherbot\nDisallow: /\n"
    record = fresh_record(robots=text)  # stored by a beamcrawl-token crawl
    other = dataclasses.replace(CFG, robots_token="otherbot")
    plan = plan_host("a.com", [entry("/a"), entry("/b")], record, None, other, NOW)
    assert plan is not None and plan.entries == [] and len(plan.disallowed) == 2
    plan = plan_host("a.com", [entry("/a"), entry("/b")], record, None, CFG, NOW)
    assert plan is not None and len(plan.entries) == 2


def test_held_hosts_are_counted_by_reason():
    cfg = dataclasses.replace(CFG, blocklist=("b.org",))
    due = [
        ("a.com", [entry("/1", host="a.com")]),
        ("b.org", [entry("/1", host="b.org"), entry("/2", host="b.org")]),
        ("c.net", [entry("/1", host="c.net")]),
        ("d.io", [entry("/1", host="d.io")]),
        ("e.fi", [entry("/1", host="e.fi")]),
        ("f.se", [entry("/1", host="f.se"), entry("/2", host="f.se"), entry("/3", host="f.se")]),
    ]
    p = TestPipeline(runner="FnApiRunner")
    hosts = p | "hosts" >> beam.Create(
        [
            ("a.com", fresh_record("a.com")),
            ("b.org", HostRecord("b.org")),
            ("c.net", HostRecord("c.net")),
            ("d.io", HostRecord("d.io", not_before=NOW + 3600)),
            ("e.fi", dataclasses.replace(unreachable_record(60, 60), host="e.fi")),
            ("f.se", fresh_record("f.se", refusals=_status_refusal(NOW - 60))),
        ]
    )
    policies = p | "policies" >> beam.Create([("c.net", HostPolicy("c.net", pause_until=NOW + 60))])
    plans = {"due": p | "due" >> beam.Create(due), "hosts": hosts, "policies": policies} | AssignSlots(cfg, NOW)
    assert_that(plans | beam.Map(lambda pl: pl.host), equal_to(["a.com"]))
    assert_that(collected(p), equal_to([]), label="No dead letters")
    result = p.run()
    result.wait_until_finish()
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace("assign_slots"))["counters"]
    }
    assert counters["hosts_blocklisted"] == 1 and counters["urls_blocklisted"] == 2
    assert counters["hosts_paused"] == 1 and counters["hosts_held"] == 1
    assert counters["hosts_robots_unreachable"] == 1
    assert counters["hosts_refused"] == 1 and counters["urls_refused"] == 3
    assert counters.get("hosts_blocked", 0) == 0


def test_new_urls_per_host_are_capped_and_revisits_are_not():
    cfg = dataclasses.replace(CFG, round_window=100.0, max_new_urls_per_host=3)
    fresh = [entry(f"/new/{i}", priority=0.9 - i / 100) for i in range(10)]
    revisits = [dataclasses.replace(entry(f"/old/{i}", priority=0.1), source="revisit") for i in range(4)]
    plan = plan_host("a.com", fresh + revisits, fresh_record(), None, cfg, NOW)
    assert plan is not None
    assert [e.url for e in plan.entries][:3] == [e.url for e in fresh[:3]]
    assert sorted(e.url for e in plan.entries[3:]) == sorted(e.url for e in revisits)
    uncapped = plan_host(
        "a.com", fresh + revisits, fresh_record(), None, dataclasses.replace(cfg, max_new_urls_per_host=0), NOW
    )
    assert uncapped is not None and len(uncapped.entries) == 14


def test_seeds_and_submissions_are_not_capped_as_new_urls():
    cfg = dataclasses.replace(CFG, round_window=100.0, max_new_urls_per_host=3)
    found = [entry(f"/new/{i}", priority=0.9) for i in range(5)]
    given = [dataclasses.replace(entry(f"/seed/{i}", priority=0.5), source=("seed", "submit")[i % 2]) for i in range(6)]
    plan = plan_host("a.com", found + given, fresh_record(), None, cfg, NOW)
    assert plan is not None
    urls = {e.url for e in plan.entries}
    assert {e.url for e in given} <= urls and len(urls & {e.url for e in found}) == 3


def https_entry(path: str) -> FrontierEntry:
    return dataclasses.replace(entry(path), url=f"https://a.com{path}", fp=abs(hash("s" + path)) % (1 << 60))


def test_robots_is_per_scheme_an_unreachable_https_robots_leaves_http_fetched():
    # Issue #24 item 8: a host first seen over https whose TLS failed (robots unreachable,
    # not yet due a retry) still gets its http robots.txt asked and its http pages fetched.
    record = unreachable_record(60, 60)
    record.robots_scheme = "https"
    entries = [https_entry("/s1"), entry("/p1"), entry("/p2")]
    plan = plan_host("a.com", entries, record, None, CFG, NOW)
    assert plan is not None and plan.fetch_robots and plan.robots_schemes == ["http"]
    assert sorted(e.url for e in plan.entries) == ["http://a.com/p1", "http://a.com/p2"]  # https waits
    assert plan.schemes == ["http"]  # the fetcher's robots.txt for each: the plan's schemes alone


def test_a_plan_names_its_urls_schemes_in_order_for_the_fetcher():
    # The fetcher reads robots.txt for every scheme of a plan before it decodes its URLs.
    entries = [entry("/p1"), https_entry("/s1"), entry("/p2"), https_entry("/s2")]
    plan = plan_host("a.com", entries, None, None, CFG, NOW)
    assert plan is not None
    assert plan.schemes == list(dict.fromkeys(e.url.partition(":")[0] for e in plan.entries))
    assert sorted(plan.schemes) == ["http", "https"]


def test_each_scheme_filters_by_its_own_robots():
    record = fresh_record(robots="User-agent: *\nDisallow: /private/\n")
    record.robots_scheme = "http"
    record.select_robots("https")
    store = RobotsRules.parse("User-agent: *\nDisallow: /\n", "beamcrawl").to_dict()
    record.robots, record.robots_fetched_at = store, NOW - 60
    entries = [https_entry("/x"), entry("/private/no"), entry("/ok")]
    plan = plan_host("a.com", entries, record, None, CFG, NOW)
    assert plan is not None and not plan.fetch_robots
    assert [e.url for e in plan.entries] == ["http://a.com/ok"]
    assert sorted(e.url for e in plan.disallowed) == ["http://a.com/private/no", "https://a.com/x"]
    # The record's stored form keeps both schemes' answers.
    back = HostRecord.from_cells("a.com", record.to_cells())
    assert back.robots_view("http").robots == fresh_record().robots
    assert back.robots_view("https").robots == store


_SCHEMES = st.sampled_from(["http", "https", "ftp"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_SCHEMES, st.integers(0, 10**6)), max_size=12))
def test_selecting_schemes_never_mixes_their_robots_answers(bookings):
    # Whatever order schemes are selected and answered in, each scheme reads back the last
    # answer booked for it (and nothing for a scheme never answered).
    record = HostRecord(host="a.com")
    last: dict[str, int] = {}
    for scheme, stamp in bookings:
        record.select_robots(scheme)
        record.robots, record.robots_fetched_at, record.robots_status = {"kind": "empty", "n": stamp}, float(stamp), 200
        last[scheme] = stamp
        record = HostRecord.from_cells("a.com", record.to_cells())
    for scheme in ("http", "https", "ftp"):
        view = record.robots_view(scheme)
        if scheme in last:
            assert view.robots == {"kind": "empty", "n": last[scheme]} and view.robots_fetched_at == last[scheme]
        else:
            assert view.robots is None and view.robots_fetched_at == 0.0 and view.robots_status is None


def test_a_robots_redirect_to_another_host_plans_the_robots_fetch_in_that_hosts_shard():
    # Issue #24 item 2: the hop is the target's request, so it is made by the loop that owns
    # the target (and keeps its clock). Once the answer is cached, the host plans as before.
    record = HostRecord(host="a.com", robots_via="ok.test")
    shards = next(n for n in range(2, 64) if shard_of("a.com", n) != shard_of("ok.test", n))
    cfg = dataclasses.replace(CFG, fetch_shards=shards)
    plan = plan_host("a.com", [entry("/p")], record, None, cfg, NOW)
    assert plan is not None and plan.fetch_robots and plan.shard == shard_of("ok.test", shards)
    known = fresh_record(robots_via="ok.test")
    plan = plan_host("a.com", [entry("/p")], known, None, cfg, NOW)
    assert plan is not None and not plan.fetch_robots and plan.shard == shard_of("a.com", shards)


def _status_refusal(at: float, token: str = "beamcrawl") -> list[dict]:
    identity = refusals.Identity(token, key="kid")
    return refusals.note([], "status", identity, {"status": 403, "url": "http://a.com/"}, at)


def _token_refusal(at: float) -> list[dict]:
    return refusals.note([], "token", refusals.Identity("beamcrawl"), {"lines": ["1: User-agent: beamcrawl"]}, at)


REFUSING_ROBOTS = "User-agent: beamcrawl\nDisallow: /\n\nUser-agent: *\nDisallow:\n"


def test_a_host_that_refused_our_signed_requests_is_held_for_its_back_off_then_rechecked_with_one_url():
    entries = [entry(f"/p/{i}.html") for i in range(20)]
    record = fresh_record(refusals=_status_refusal(NOW - 3600))
    assert plan_host("a.com", entries, record, None, CFG, NOW) is None
    assert hold_reason("a.com", record, None, CFG, NOW) == "refused"
    # Another crawler's refusal (another token) does not hold this one.
    other = fresh_record(refusals=_status_refusal(NOW - 3600, token="otherbot"))
    assert len(plan_host("a.com", entries, other, None, CFG, NOW).entries) == 10
    # A day later the back-off is over: one URL, the best ranked, is the recheck.
    later = dataclasses.replace(record, robots_fetched_at=NOW + 86400 - 60)
    plan = plan_host("a.com", entries, later, None, CFG, NOW + 86400)
    assert plan is not None and len(plan.entries) == 1 and not plan.fetch_robots
    assert hold_reason("a.com", later, None, CFG, NOW + 86400) is None


def test_a_host_whose_robots_txt_refuses_our_token_is_held_until_its_robots_txt_is_due_then_fetches_it_alone():
    entries = [entry(f"/p/{i}.html") for i in range(20)]
    record = fresh_record(robots=REFUSING_ROBOTS, refusals=_token_refusal(NOW - 60))
    # Held with every URL queued: not marked disallowed (finished), not fetched.
    assert plan_host("a.com", entries, record, None, CFG, NOW) is None
    assert hold_reason("a.com", record, None, CFG, NOW + 3600) == "refused"
    stale = NOW + CFG.robots_max_age + 1
    assert hold_reason("a.com", record, None, CFG, stale) is None
    plan = plan_host("a.com", entries, record, None, CFG, stale)
    assert plan is not None and plan.fetch_robots and plan.entries == [] and plan.disallowed == []
    # Without the refusal on record the same file's URLs are disallowed one by one, as before.
    plain = fresh_record(robots=REFUSING_ROBOTS)
    assert len(plan_host("a.com", entries, plain, None, CFG, NOW).disallowed) == 20


def test_urls_a_robots_check_refuses_past_its_bound_are_disallowed_and_counted():
    from robots_bombs import CAPPED_PATH, capped_robots  # tests/robots_bombs.py

    record = fresh_record(robots=capped_robots())
    plan = plan_host("a.com", [entry(CAPPED_PATH), entry("/ok")], record, None, CFG, NOW)
    assert plan is not None
    assert [e.url for e in plan.disallowed] == [f"http://a.com{CAPPED_PATH}"]
    assert [e.url for e in plan.entries] == ["http://a.com/ok"]
    assert plan.robots_capped == 1
    # A plain Disallow refuses as it always did: not counted as capped.
    plain = plan_host("a.com", [entry("/private/x")], fresh_record(), None, CFG, NOW)
    assert plain is not None and len(plain.disallowed) == 1 and plain.robots_capped == 0
