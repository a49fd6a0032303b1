"""The policy resolver: --resolve rules, the address policy, caching (negative too), pinning."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.net.gate import AddressRefused
from beamcrawl.core.net.netpolicy import ResolveRules, canonical_address
from beamcrawl.core.net.resolver import FetchRefused, PolicyResolver, hostname_of, resolve_many


class FakeDNS:
    """Answers from a table, counting lookups; a missing name is NXDOMAIN."""

    def __init__(self, table: dict[str, list[str]], delay: float = 0.0) -> None:
        self.table = table
        self.calls: list[str] = []
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0

    async def __call__(self, host: str) -> list[str]:
        self.calls.append(host)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        if host not in self.table:
            raise OSError(f"no such host {host}")
        return self.table[host]


def run(coro):
    return asyncio.run(coro)


def test_rules_first_then_dns_and_answers_are_cached():
    dns = FakeDNS({"pub.example": ["93.184.216.34", "2606:2800:220:1::"]})
    resolver = PolicyResolver(ResolveRules([("*.test", "127.0.0.1")]), allow_private=True, ttl=60, lookup=dns)

    async def go():
        a = await resolver.resolution("x.test")
        b = await resolver.resolution("pub.example")
        c = await resolver.resolution("pub.example")
        return a, b, c

    a, b, c = run(go())
    assert a.ip == "127.0.0.1" and a.error is None and a.ttl == 60
    assert b.ip == "93.184.216.34" and b.addrs == ("93.184.216.34", "2606:2800:220:1::")
    assert c is b and dns.calls == ["pub.example"]


def test_negative_answers_are_cached_for_the_ttl_too():
    dns = FakeDNS({})
    resolver = PolicyResolver(ResolveRules(), allow_private=False, ttl=60, lookup=dns)

    async def go():
        first = await resolver.resolution("nx.example")
        second = await resolver.resolution("nx.example")
        with pytest.raises(FetchRefused, match="dns"):
            await resolver.addresses("nx.example")
        return first, second

    first, second = run(go())
    assert first.ip is None and first.error.startswith("dns:")
    assert second is first and dns.calls == ["nx.example"]


def test_address_policy_applies_to_resolved_and_mapped_addresses():
    dns = FakeDNS({"sneaky.example": ["10.1.2.3"], "meta.example": ["169.254.169.254"]})
    strict = PolicyResolver(ResolveRules([("local.test", "127.0.0.1")]), allow_private=False, lookup=dns)
    loose = PolicyResolver(ResolveRules(), allow_private=True, lookup=dns)

    async def go():
        return (
            await strict.resolution("sneaky.example"),
            await strict.resolution("local.test"),
            await loose.resolution("meta.example"),
        )

    sneaky, local, meta = run(go())
    assert sneaky.error.startswith("refused address") and "private" in sneaky.error
    assert local.error.startswith("refused address") and "loopback" in local.error
    assert meta.error.startswith("refused address") and "metadata" in meta.error


def test_pinned_answers_are_used_without_a_lookup_and_checked_again():
    dns = FakeDNS({"a.example": ["93.184.216.34"]})
    resolver = PolicyResolver(ResolveRules(), allow_private=False, lookup=dns)
    now = time.time()
    resolver.pin("a.example", "203.0.114.9", None, now, 300)  # what the resolve stage stored
    resolver.pin("b.example", "127.0.0.1", None, now, 300)  # stored by a run that allowed private
    resolver.pin("c.example", None, "dns: gone", now, 300)
    resolver.pin("d.example", "93.184.216.34", None, now - 400, 300)  # expired: looked up again

    async def go():
        return [await resolver.resolution(h) for h in ("a.example", "b.example", "c.example", "d.example")]

    a, b, c, d = run(go())
    assert a.ip == "203.0.114.9"
    assert b.ip is None and "loopback" in b.error  # this run's flags decide
    assert c.error == "dns: gone"
    assert d.error.startswith("dns:")  # d.example is not in the fake DNS: it was asked
    assert dns.calls == ["d.example"]


def test_resolve_many_runs_lookups_concurrently_with_a_bound():
    table = {f"h{i}.example": [f"93.184.216.{i}"] for i in range(40)}
    dns = FakeDNS(table, delay=0.05)
    resolver = PolicyResolver(ResolveRules(), allow_private=False, lookup=dns)
    answers = run(resolve_many(resolver, list(table) + ["h0.example"], concurrency=10))
    assert {h: a.ip for h, a in answers.items()} == {h: ips[0] for h, ips in table.items()}
    assert dns.max_in_flight == 10 and len(dns.calls) == 40  # concurrent, not one after another


@pytest.mark.parametrize(
    "slot, name",
    [("a.com", "a.com"), ("a.com:8080", "a.com"), ("[::1]:8080", "::1"), ("127.0.0.1:80", "127.0.0.1")],
)
def test_hostname_of_slot_keys(slot, name):
    assert hostname_of(slot) == name


@pytest.mark.parametrize("name", ["www.example..de", "x" * 64 + ".example", ".lead.example"])
def test_a_name_the_system_resolver_cannot_encode_is_a_dns_answer_not_a_crash(name: str):
    """getaddrinfo raises UnicodeError (a ValueError) for an empty or over-long label, before any
    query is sent; the resolver promises never to raise, so it is that name's negative answer."""
    resolver = PolicyResolver(ResolveRules(), allow_private=False, ttl=60)
    answer = run(resolver.resolution(name))
    assert answer.addrs == () and answer.error is not None and answer.error.startswith("dns:")


@settings(max_examples=300, deadline=None)
@given(answer=st.lists(st.ip_addresses().map(str), min_size=1, max_size=40, unique=True), allow_private=st.booleans())
def test_the_connector_is_given_the_one_address_politeness_is_accounted_to(answer: list[str], allow_private: bool):
    """Whatever DNS answers, the connector gets ``resolution().ip`` alone, or an error: never an
    address another IP clock counts (or none does), nor one the policy refuses."""
    resolver = PolicyResolver(ResolveRules(), allow_private=allow_private, lookup=FakeDNS({"h.example": answer}))

    async def go():
        try:
            infos = await resolver.resolve("h.example", 80)
        except (OSError, AddressRefused):
            infos = None
        return infos, await resolver.resolution("h.example")

    infos, resolution = run(go())
    if resolution.ip is None:
        assert infos is None
    else:
        assert [info["host"] for info in infos] == [resolution.ip] == [canonical_address(answer[0])]


@settings(max_examples=300, deadline=None)
@given(v4=st.ip_addresses(v=4), how=st.sampled_from(["literal", "dns", "rule", "pin"]))
def test_an_ipv4_address_is_one_address_however_it_is_spelt(v4, how):
    """The IPv4-mapped IPv6 spelling of an address reaches the same server as the address: the
    answer is the same string, so that one --ip-delay clock (and one fetch shard) counts both."""
    mapped = f"::ffff:{v4}"
    rules = ResolveRules([("rule.example", mapped)] if how == "rule" else [])
    resolver = PolicyResolver(rules, allow_private=True, lookup=FakeDNS({"dns.example": [mapped]}))
    if how == "pin":
        resolver.pin("pin.example", mapped, None, time.time(), 300)
    host = {"literal": f"[{mapped}]", "dns": "dns.example", "rule": "rule.example", "pin": "pin.example"}[how]
    answer = run(resolver.resolution(host))
    if answer.error is None:  # link-local is refused, however written
        assert answer.ip == run(resolver.resolution(str(v4))).ip == str(v4)


class RebindingDNS(FakeDNS):
    """Answers each lookup of a name with the next address of its list (a rebinding name)."""

    async def __call__(self, host: str) -> list[str]:
        answers = self.table[host]
        self.table = {**self.table, host: answers[1:] + answers[:1]}
        await asyncio.sleep(self.delay)
        self.calls.append(host)
        return answers[:1]


@settings(max_examples=50, deadline=None)
@given(callers=st.integers(2, 8), pin_at=st.one_of(st.none(), st.integers(0, 7)))
def test_callers_at_once_get_one_answer_and_a_pin_made_meanwhile_stands(callers: int, pin_at: int | None):
    """However many ask for a name at once (the host's crawl, a robots.txt hop to it, the
    connector), one lookup answers them all: each lookup of a rebinding name may answer another
    address, and the one a caller judged must be the one the connector then connects to. A pin
    (the resolve stage's answer) made while a lookup is under way is not overwritten by it."""
    dns = RebindingDNS({"h.example": ["93.184.216.1", "93.184.216.2", "93.184.216.3"]}, delay=0.01)
    resolver = PolicyResolver(ResolveRules(), allow_private=False, lookup=dns)

    async def go():
        tasks = []
        for i in range(callers):
            tasks.append(asyncio.ensure_future(resolver.resolution("h.example")))
            await asyncio.sleep(0)
            if i == pin_at:
                resolver.pin("h.example", "93.184.216.9", None, time.time(), 300)
        answers = await asyncio.gather(*tasks)
        return answers, await resolver.resolution("h.example")

    answers, after = run(go())
    assert len(dns.calls) == 1
    if pin_at is None or pin_at >= callers:
        assert {a.ip for a in answers} == {after.ip} == {"93.184.216.1"}
    else:
        assert after.ip == "93.184.216.9"  # the pin stands, once made
