"""Tests for beamcrawl.core.net.netpolicy."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.net.netpolicy import (
    ForbiddenAddress,
    ResolveRules,
    check_address,
    parse_resolve_rule,
)

# --- check_address -----------------------------------------------------------------------------

ALWAYS_REFUSED = [
    ("169.254.169.254", "link-local address 169.254.169.254 (cloud metadata endpoint)"),
    ("169.254.0.1", "link-local address 169.254.0.1"),
    ("169.254.255.255", "link-local address 169.254.255.255"),
    ("fe80::1", "link-local address fe80::1"),
    ("fe80::1%eth0", "link-local address fe80::1%eth0"),
    ("[fe80::a:b]", "link-local address fe80::a:b"),
    ("febf::1", "link-local address febf::1"),
    # IPv6 forms that carry the metadata address
    ("::ffff:169.254.169.254", "inside ::ffff:a9fe:a9fe"),
    ("::ffff:a9fe:a9fe", "cloud metadata endpoint"),
    ("::169.254.169.254", "link-local address 169.254.169.254"),  # IPv4-compatible
    ("64:ff9b::169.254.169.254", "link-local address 169.254.169.254"),  # NAT64
    ("2002:a9fe:a9fe::1", "link-local address 169.254.169.254"),  # 6to4
    ("2001:0:a9fe:a9fe::5601:5601", "link-local address 169.254.169.254"),  # Teredo
    ("2001:0:808:808::5601:5601", "link-local address 169.254.169.254"),  # Teredo client
    ("64:ff9b:1::a9fe:a9fe", "link-local address 169.254.169.254"),  # local-use NAT64
    ("::ffff:0:a9fe:a9fe", "link-local address 169.254.169.254"),  # IPv4-translated
]


@pytest.mark.parametrize(("ip", "reason"), ALWAYS_REFUSED)
@pytest.mark.parametrize("allow_private", [False, True])
def test_link_local_is_always_refused(ip: str, reason: str, allow_private: bool) -> None:
    with pytest.raises(ForbiddenAddress) as info:
        check_address(ip, allow_private)
    assert reason in str(info.value)
    assert isinstance(info.value, ValueError)


PRIVATE = [
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("::1", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("fec0::1", "private"),  # deprecated site-local
    ("100.64.0.1", "shared (carrier-grade NAT)"),
    ("100.127.255.255", "shared (carrier-grade NAT)"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("ff02::1", "multicast"),
    ("0.1.2.3", "reserved"),
    ("192.0.0.8", "reserved"),
    ("192.0.2.1", "reserved"),
    ("198.18.0.1", "reserved"),
    ("198.51.100.7", "reserved"),
    ("203.0.113.9", "reserved"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("2001:db8::1", "reserved"),
    ("100::1", "reserved"),
    ("4000::1", "reserved"),  # outside global unicast 2000::/3
    # IPv4 inside IPv6 is judged as IPv4
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:10.1.2.3", "private"),
    ("64:ff9b::10.0.0.1", "private"),
    ("2001:0:808:808::80ff:fffe", "loopback"),  # Teredo, client 127.0.0.1
    ("2001:0:a00:1::f7f7:f7f7", "private"),  # Teredo, server 10.0.0.1
]


@pytest.mark.parametrize(("ip", "kind"), PRIVATE)
def test_private_and_special_refused_by_default(ip: str, kind: str) -> None:
    with pytest.raises(ForbiddenAddress) as info:
        check_address(ip, allow_private=False)
    assert str(info.value).startswith(f"{kind} address ")


@pytest.mark.parametrize(("ip", "kind"), PRIVATE)
def test_private_and_special_allowed_with_flag(ip: str, kind: str) -> None:
    check_address(ip, allow_private=True)


@pytest.mark.parametrize(
    "ip",
    [
        "8.8.8.8",
        "93.184.216.34",
        "172.32.0.1",  # just outside 172.16/12
        "100.128.0.1",  # just outside 100.64/10
        "169.253.255.255",
        "2606:4700:4700::1111",
        "2a00:1450:4001::200e",
        "::ffff:8.8.8.8",
        "64:ff9b::8.8.8.8",
        "[2606:4700::1]",
        " 8.8.4.4 ",
    ],
)
@pytest.mark.parametrize("allow_private", [False, True])
def test_public_addresses_are_fine(ip: str, allow_private: bool) -> None:
    check_address(ip, allow_private)


def _refused(ip: str, allow_private: bool) -> bool:
    try:
        check_address(ip, allow_private)
    except ForbiddenAddress:
        return True
    return False


_V4 = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)
# Addresses from each IPv4 block the policy refuses, and from either side of its edges.
_SPECIAL_V4 = [
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
]  # fmt: skip
_NEAR_SPECIAL_V4 = st.builds(
    lambda net, offset: ipaddress.IPv4Address(
        max(0, min(2**32 - 1, int(net.network_address) + offset % (net.num_addresses + 2) - 1))
    ),
    st.sampled_from([ipaddress.IPv4Network(n) for n in _SPECIAL_V4]),
    st.integers(0, 2**32),
)


@settings(max_examples=3000, deadline=None)
@given(
    inner=_V4 | _NEAR_SPECIAL_V4,
    other=_V4 | _NEAR_SPECIAL_V4,
    low=st.integers(0, 2**64 - 1),
    allow_private=st.booleans(),
)
def test_an_ipv6_address_carrying_a_refused_ipv4_is_refused(
    inner: ipaddress.IPv4Address, other: ipaddress.IPv4Address, low: int, allow_private: bool
) -> None:
    """Every IPv6 form that carries an IPv4 address, wherever it sits, is refused when that
    address is: mapped, compatible, translated, NAT64 (well-known and local-use), 6to4, and
    Teredo's server and client (the client held inverted)."""
    if not _refused(str(inner), allow_private):
        return
    v4 = int(inner)
    forms = [
        (0xFFFF << 32) | v4,  # ::ffff:a.b.c.d
        (0xFFFF << 48) | v4,  # ::ffff:0:a.b.c.d
        (0x64FF9B << 96) | v4,  # 64:ff9b::a.b.c.d
        (0x64FF9B0001 << 80) | (low & (2**48 - 1)) << 32 | v4,  # 64:ff9b:1:...:a.b.c.d
        (0x2002 << 112) | (v4 << 80) | low,  # 2002:a.b.c.d::
        (0x20010000 << 96) | (v4 << 64) | (low & ~0xFFFFFFFF) | int(other),  # Teredo server
        (0x20010000 << 96) | (int(other) << 64) | (low & ~0xFFFFFFFF) | (v4 ^ 0xFFFFFFFF),  # client
    ]
    if v4 > 1:
        forms.append(v4)  # ::a.b.c.d
    for form in forms:
        ip = str(ipaddress.IPv6Address(form))
        assert _refused(ip, allow_private), ip


@pytest.mark.parametrize("ip", ["", "localhost", "example.com", "1.2.3", "999.1.1.1", "::g"])
def test_not_an_address(ip: str) -> None:
    with pytest.raises(ForbiddenAddress, match="not an IP address"):
        check_address(ip, allow_private=True)


# --- --resolve rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("site.test=127.0.0.1", ("site.test", "127.0.0.1")),
        ("*.SimWeb.Test=127.0.0.2", ("*.simweb.test", "127.0.0.2")),
        ("*=10.0.0.1", ("*", "10.0.0.1")),
        ("v6.test=::1", ("v6.test", "::1")),
        ("v6.test=[::1]", ("v6.test", "::1")),
        ("v6.test=2001:DB8:0::1", ("v6.test", "2001:db8::1")),
        (" a.test = 1.2.3.4 ", ("a.test", "1.2.3.4")),
        ("a.test.=1.2.3.4", ("a.test", "1.2.3.4")),
        ("host[0-9].test=1.2.3.4", ("host[0-9].test", "1.2.3.4")),
    ],
)
def test_parse_resolve_rule(spec: str, expected: tuple[str, str]) -> None:
    assert parse_resolve_rule(spec) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("site.test", "expected HOSTGLOB=IP"),
        ("site.test:80:127.0.0.1", "expected HOSTGLOB=IP"),
        ("=127.0.0.1", "empty host pattern"),
        ("site.test=", "'' is not an IP address"),
        ("site.test=localhost", "'localhost' is not an IP address"),
        ("site.test=300.1.1.1", "'300.1.1.1' is not an IP address"),
        ("site.test=1.2.3.4=5", "is not an IP address"),
        ("site.test:8080=1.2.3.4", "is not a host name"),
        ("my site=1.2.3.4", "is not a host name"),
        ("http://x=1.2.3.4", "is not a host name"),
    ],
)
def test_parse_resolve_rule_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_resolve_rule(spec)
    text = str(info.value)
    assert message in text
    assert "\n" not in text
    assert text.startswith("bad resolve rule ")


def test_resolve_rules_first_match_wins() -> None:
    rules = ResolveRules.from_specs(["special.simweb.test=127.0.0.9", "*.simweb.test=127.0.0.1", "*=127.0.0.2"])
    assert rules.lookup("special.simweb.test") == "127.0.0.9"
    assert rules.lookup("a.simweb.test") == "127.0.0.1"
    assert rules.lookup("simweb.test") == "127.0.0.2"  # "*." needs a label before it
    assert rules.lookup("anything.else") == "127.0.0.2"
    assert len(rules) == 3
    assert bool(rules)
    assert list(rules) == list(rules.rules)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("a.simweb.test", "127.0.0.1"),
        ("A.SimWeb.TEST", "127.0.0.1"),  # case-insensitive
        ("a.simweb.test.", "127.0.0.1"),  # trailing dot
        ("a.simweb.test:8080", "127.0.0.1"),  # port ignored
        ("deep.a.simweb.test", "127.0.0.1"),  # "*" crosses dots, as in fnmatch
        ("simweb.test.evil.com", None),  # anchored at the end
        ("xsimweb.test", None),
        ("[::1]:8080", None),
        ("other.test", None),
    ],
)
def test_resolve_rules_lookup(host: str, expected: str | None) -> None:
    rules = ResolveRules([("*.simweb.test", "127.0.0.1")])
    assert rules.lookup(host) == expected


def test_resolve_rules_ipv6_hosts_and_classes() -> None:
    rules = ResolveRules([("host[12].test", "::1"), ("?.test", "10.0.0.1")])
    assert rules.lookup("host1.test") == "::1"
    assert rules.lookup("host3.test") is None
    assert rules.lookup("x.test") == "10.0.0.1"
    assert ResolveRules([("::1", "127.0.0.1")]).lookup("::1") == "127.0.0.1"


def test_empty_rules() -> None:
    rules = ResolveRules()
    assert rules.lookup("anything") is None
    assert not rules
    assert len(rules) == 0
    assert "ResolveRules" in repr(rules)


def test_rules_accept_config_tuples() -> None:
    # CrawlConfig.resolve holds parse_resolve_rule() results.
    rules = ResolveRules((parse_resolve_rule("*.test=127.0.0.1"),))
    assert rules.lookup("x.test") == "127.0.0.1"


# The IANA special-purpose blocks, and around them: the oracle is Python's ipaddress, whose
# is_global reads those registries (3.11's takes all of 2001::/23 for not global; IANA marks
# some assignments in it globally reachable, and Teredo's reach is that of the IPv4 addresses
# it carries, judged above).
_SPECIAL_NETS = [
    ipaddress.ip_network(n)
    for n in (
        *_SPECIAL_V4, "192.31.196.0/24", "192.52.193.0/24", "192.175.48.0/24", "255.255.255.255/32",
        "::/96", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23", "2001:1::/48",
        "2001:2::/48", "2001:3::/32", "2001:4:112::/48", "2001:10::/28", "2001:20::/28", "2001:30::/28",
        "2001:db8::/32", "2002::/16", "2620:4f:8000::/48", "3fff::/20", "5f00::/16", "fc00::/7", "fe80::/10",
        "fec0::/10", "ff00::/8", "2000::/3",
    )
]  # fmt: skip
_IANA_GLOBAL_IN_2001_23 = [
    ipaddress.ip_network(n)
    for n in ("2001:1::1/128", "2001:1::2/128", "2001:1::3/128", "2001:3::/32", "2001:4:112::/48", "2001:30::/28")
]
_TEREDO = ipaddress.ip_network("2001::/32")


@settings(max_examples=3000, deadline=None)
@given(net=st.sampled_from(_SPECIAL_NETS), offset=st.integers(0, 2**128))
def test_what_is_not_globally_reachable_is_refused_without_the_flag(net, offset: int) -> None:
    address = net.network_address + offset % net.num_addresses
    if address.is_global or address in _TEREDO or any(address in n for n in _IANA_GLOBAL_IN_2001_23):
        return
    assert _refused(str(address), allow_private=False), address
