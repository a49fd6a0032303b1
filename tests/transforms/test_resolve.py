"""Resolve hosts: the plain functions with a fake DNS, then the transform on a real runner."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.schemas.records import HostRecord
from beamcrawl.transforms.assign_slots import fetch_shard
from beamcrawl.transforms.dead_letter import collected
from beamcrawl.transforms.resolve import ResolveHosts, needs_lookup, resolve_records

CFG = CrawlConfig(
    out="/tmp/x",
    store="sqlite:///tmp/x",
    fetch_shards=8,
    dns_ttl=300.0,
    resolve=(("*.sim.test", "127.0.0.1"), ("*.lan.test", "10.0.0.5")),
)


class FakeDNS:
    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def __call__(self, host: str) -> list[str]:
        self.calls.append(host)
        await asyncio.sleep(0.01)
        if host not in self.table:
            raise OSError("Name or service not known")
        return self.table[host]


def test_only_records_without_a_fresh_answer_are_looked_up():
    now = time.time()
    dns = FakeDNS({"a.example": ["93.184.216.34"], "b.example": ["93.184.216.35"]})
    fresh = HostRecord("a.example", ip="198.51.100.1", resolved_at=now - 10, dns_ttl=300)
    stale = HostRecord("b.example:8080", ip="198.51.100.2", resolved_at=now - 400, dns_ttl=300)
    new = HostRecord("c.example")
    out = resolve_records([fresh, stale, new], CFG, now, lookup=dns)
    assert sorted(dns.calls) == ["b.example", "c.example"]  # port stripped for the lookup
    assert out[0] is fresh
    assert out[1].ip == "93.184.216.35" and out[1].host == "b.example:8080" and out[1].dns_error is None
    assert out[2].ip is None and out[2].dns_error.startswith("dns:")
    assert all(not needs_lookup(r, time.time()) for r in out)
    assert out[2].dns_ttl == 300.0  # the failure is kept as long as an answer would be
    # The input records are not changed (Beam may hand the same object to other consumers).
    assert stale.ip == "198.51.100.2" and new.resolved_at == 0


def test_a_cached_failure_is_not_asked_again_while_fresh():
    now = time.time()
    dns = FakeDNS({})
    failed = resolve_records([HostRecord("nx.example")], CFG, now, lookup=dns)
    again = resolve_records(failed, CFG, now + 60, lookup=dns)
    assert dns.calls == ["nx.example"] and again[0].dns_error == failed[0].dns_error
    later = resolve_records(failed, CFG, now + 301, lookup=dns)
    assert dns.calls == ["nx.example", "nx.example"] and later[0].resolved_at > failed[0].resolved_at


def test_hosts_on_one_address_end_up_in_one_fetch_shard_with_an_ip_delay():
    out = resolve_records(
        [HostRecord(f"site{i}.sim.test:8800") for i in range(20)],
        CrawlConfig(**{**CFG.__dict__, "allow_private_networks": True}),
        time.time(),
    )
    assert {r.ip for r in out} == {"127.0.0.1"}
    assert len({fetch_shard(r.host, r, 8, ip_delay=0.1) for r in out}) == 1  # one owner per IP
    assert len({fetch_shard(r.host, r, 8) for r in out}) > 1  # no per-IP gap: spread by name


def test_transform_resolves_with_rules_and_policy():
    now = time.time()
    records = [
        ("a.sim.test:8800", HostRecord("a.sim.test:8800")),
        ("b.lan.test", HostRecord("b.lan.test")),  # private: refused without the flag
        ("93.184.216.34", HostRecord("93.184.216.34")),  # an IP literal resolves to itself
        ("kept.example", HostRecord("kept.example", ip="93.184.216.35", resolved_at=now, dns_ttl=300)),
    ]
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | beam.Create(records) | ResolveHosts(CFG, now)
        summary = out | beam.Map(lambda kv: (kv[0], kv[1].ip, " ".join((kv[1].dns_error or "").split()[:3])))
        assert_that(
            summary,
            equal_to(
                [
                    ("a.sim.test:8800", None, "refused address: loopback"),
                    ("b.lan.test", None, "refused address: private"),
                    ("93.184.216.34", "93.184.216.34", ""),
                    ("kept.example", "93.184.216.35", ""),
                ]
            ),
        )
        assert_that(collected(p), equal_to([]), label="No dead letters")


def test_a_stored_refusal_is_judged_again_under_this_runs_flags():
    """A host refused by a run without --allow-private-networks is looked up again by a run
    with it (and allowed); a plain DNS failure stays cached while fresh."""
    now = time.time()
    mapped = dataclasses.replace(CFG, resolve=(("intranet.example", "10.1.1.1"),))
    refused = resolve_records(
        [HostRecord("intranet.example")], dataclasses.replace(mapped, allow_private_networks=False), now
    )
    assert refused[0].dns_error.startswith("refused address: private address 10.1.1.1")
    assert needs_lookup(refused[0], now + 1)
    allowed = resolve_records(refused, dataclasses.replace(mapped, allow_private_networks=True), now + 1)
    assert allowed[0].ip == "10.1.1.1" and allowed[0].dns_error is None
