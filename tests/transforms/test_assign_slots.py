"""Slot assignment: the plain planning function, then the transform on a real runner."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamcrawl.core.config import CrawlConfig
from beamcrawl.core.robots import RobotsRules
from beamcrawl.schemas.records import FrontierEntry, HostPolicy, HostRecord
from beamcrawl.transforms.assign_slots import AssignSlots, plan_host, shard_of

NOW = 1_800_000_000.0
CFG = CrawlConfig(out="/tmp/x", store="sqlite:///tmp/x", min_delay=1.0, round_window=10.0, fetch_shards=8)


def entry(path: str, priority: float = 0.5, host: str = "a.com", due_ms: int = 1000, fp: int | None = None) -> FrontierEntry:
    return FrontierEntry(
        url=f"http://{host}{path}", fp=fp if fp is not None else abs(hash(path)) % (1 << 60), host=host,
        due_ms=due_ms, priority=priority,
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


def test_stale_robots_is_fetched_again():
    record = fresh_record()
    record.robots_fetched_at = NOW - 25 * 3600
    plan = plan_host("a.com", [entry("/x")], record, None, CFG, NOW)
    assert plan is not None and plan.fetch_robots


def test_fresh_robots_filters_without_spending_slots_and_orders_by_priority():
    entries = [entry(f"/p/{i}", priority=i / 100) for i in range(30)] + [entry(f"/private/{i}", priority=1.0) for i in range(5)]
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
    SAMPLE_DUE = [("a.com", entry(f"/p/{i}", host="a.com")) for i in range(25)] + [
        ("b.org", entry("/only", host="b.org")),
        ("c.net", entry("/blocked", host="c.net")),
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
                equal_to([
                    ("a.com", 10, False, shard_of("a.com", 8)),
                    ("b.org", 1, True, shard_of("b.org", 8)),
                ]),
            )


def test_shard_is_stable_and_in_range():
    assert shard_of("example.com", 16) == shard_of("example.com", 16)
    assert {shard_of(f"h{i}.com", 4) for i in range(200)} == {0, 1, 2, 3}

