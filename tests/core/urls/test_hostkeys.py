"""Host keys (core/urls/hostkeys.py) and every function that derives a key from a host.

Each is total (any string gives a non-empty ASCII key) and they agree: the policy key an
operator sets is the one select looks up, a domain is the host or a suffix of it, a shard is in
range, the Parquet columns carry the same domain as the budgets.
"""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import hostile_inputs as hostile
from beamcrawl.core.urls.hostkeys import domain_of, host_key, hostname_of, is_ip_key, shard_of, split_slot
from beamcrawl.core.urls.urlnorm import InvalidURL, host_of, normalize
from beamcrawl.cli.hosts import policy_key
from beamcrawl.schemas.records import FetchResult, FrontierEntry, Link, ParsedPage
from beamcrawl.transforms import budgets as budget_stage
from beamcrawl.transforms import parquet_io
from beamcrawl.transforms.assign_slots import fetch_shard


def profile(examples: int) -> settings:
    """Repeatable runs: a fixed example count, derandomized, no deadline (the machine is shared)."""
    return settings(
        max_examples=examples, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
    )


# --- tables --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slot", "key", "name", "domain"),
    [
        ("[::1]", "[::1]", "::1", "[::1]"),
        ("[::1]:8080", "[::1]", "::1", "[::1]"),
        ("::1", "[::1]", "::1", "[::1]"),
        ("[0:0:0:0:0:0:0:1]:0", "[::1]", "::1", "[::1]"),
        ("[2001:DB8::1]", "[2001:db8::1]", "2001:db8::1", "[2001:db8::1]"),
        ("[2001:4860::8888]:443", "[2001:4860::8888]", "2001:4860::8888", "[2001:4860::8888]"),
        ("[::ffff:1.2.3.4]", "[::ffff:102:304]", "::ffff:102:304", "[::ffff:102:304]"),
        ("2130706433", "127.0.0.1", "127.0.0.1", "127.0.0.1"),
        ("0x7f.1:99999", "127.0.0.1", "127.0.0.1", "127.0.0.1"),
        ("0177.0.0.1.", "127.0.0.1", "127.0.0.1", "127.0.0.1"),
        ("Blog.Example.CO.UK.:8080", "blog.example.co.uk", "blog.example.co.uk", "example.co.uk"),
        ("bücher.example", "xn--bcher-kva.example", "xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("例え。テスト", "xn--r8jz45g.xn--zckzah", "xn--r8jz45g.xn--zckzah", "xn--r8jz45g.xn--zckzah"),
        ("alice.github.io", "alice.github.io", "alice.github.io", "alice.github.io"),
        ("co.uk", "co.uk", "co.uk", "co.uk"),
        ("localhost:65535", "localhost", "localhost", "localhost"),
        # not hosts: a key of their own, "~" and the escaped text, never empty
        ("", "~", "~", "~"),
        ("[fe80::1%eth0]", "~%5Bfe80%3A%3A1%25eth0%5D", "~%5Bfe80%3A%3A1%25eth0%5D", "~%5Bfe80%3A%3A1%25eth0%5D"),
        ("xn--", "~xn--", "~xn--", "~xn--"),
        ("a..b", "~a..b", "~a..b", "~a..b"),
        ("\x00", "~%00", "~%00", "~%00"),
        ("\udcff.com", "~%FF.com", "~%FF.com", "~%FF.com"),
        ("a" * 64 + ".com", "~" + "a" * 64 + ".com", "~" + "a" * 64 + ".com", "~" + "a" * 64 + ".com"),
    ],
)
def test_host_keys_table(slot: str, key: str, name: str, domain: str) -> None:
    assert host_key(slot) == key
    assert hostname_of(slot) == name
    assert domain_of(slot) == domain


def test_ipv6_hosts_have_their_own_domains() -> None:
    """They shared the domain "2001" (and ::1 had the empty one)."""
    assert domain_of("[2001:db8::1]") != domain_of("[2001:4860::8888]")
    assert budget_stage.domain_of("[::1]") == "[::1]"
    assert budget_stage.domain_of("[::1]:8080") == "[::1]"


def test_policy_on_a_bare_ipv6_host_covers_its_port_slots() -> None:
    """set_policy stores under policy_key; select looks a slot's policy up under host_key."""
    for written in ("[::1]", "::1", "http://[::1]/", "[0::1]"):
        assert policy_key(written) == "[::1]" == host_key("[::1]:8080")


def test_split_slot() -> None:
    assert split_slot("[::1]:80") == ("[::1]", "80")
    assert split_slot("::1") == ("::1", "")
    assert split_slot("a.com:8080") == ("a.com", "8080")
    assert split_slot("[::1") == ("[::1", "")


# --- properties ----------------------------------------------------------------------------------


def _check_key(key: str) -> None:
    assert key and key.isascii() and key == key.strip()
    key.encode()  # a store row key


@profile(400)
@given(st.one_of(hostile.slots, hostile.any_text, hostile.ipv6_hosts))
@example("0\r0")  # a newline inside a host is dropped, by URL parsers and by policy_key alike
@example(" a.example\t")
def test_every_host_key_function_is_total(slot: str) -> None:
    key, name, domain = host_key(slot), hostname_of(slot), domain_of(slot)
    for value in (key, name, domain):
        _check_key(value)
    assert key == domain or key.endswith("." + domain)  # a domain is the host or a suffix of it
    assert host_key(name) == key  # the resolver's name and the key name one host
    assert host_key(key) == key and domain_of(key) == domain  # idempotent
    assert 0 <= shard_of(slot, 7) < 7 and 0 <= fetch_shard(slot, None, 13) < 13
    assert parquet_io._host_domain(slot) == domain == budget_stage.domain_of(slot)
    try:
        policy = policy_key(slot)
    except ValueError:
        return
    _check_key(policy)
    if not any(c in slot for c in "/?#\\@"):  # a host, not a URL or path (which policy_key takes too)
        assert host_key(policy) == key  # an operator's policy lands where select looks


@profile(400)
@given(st.one_of(hostile.urls, hostile.any_text, hostile.any_text.map(lambda t: "http://" + t)))
def test_host_of_is_total(text: str) -> None:
    """host_of: a non-empty slot that normalises to itself, or InvalidURL with a reason."""
    try:
        slot = host_of(text)
    except InvalidURL as exc:
        assert str(exc)
        return
    _check_key(slot)
    scheme = normalize(text).partition(":")[0]
    assert host_of(f"{scheme}://{slot}/") == slot and host_key(slot) == split_slot(slot)[0]


@profile(300)
@given(hostile.ipv6_hosts, hostile.ipv6_hosts)
def test_distinct_ip_literals_are_distinct_domains(a: str, b: str) -> None:
    if ipaddress.IPv6Address(a[1:-1]) != ipaddress.IPv6Address(b[1:-1]):
        assert domain_of(a) != domain_of(b)
    assert is_ip_key(domain_of(a)) and domain_of(a) == host_key(a) and domain_of(f"{a}:8080") == domain_of(a)


@profile(300)
@given(hostile.ipv4_numbers, st.sampled_from(["dword", "hex", "octal", "short", "dotted"]))
def test_ipv4_forms_are_one_key(value: int, form: str) -> None:
    octets = [(value >> s) & 0xFF for s in (24, 16, 8, 0)]
    text = {
        "dword": str(value),
        "hex": hex(value),
        "octal": ".".join(f"0{o:o}" for o in octets),
        "short": f"{octets[0]}.{value & 0xFFFFFF}",
        "dotted": ".".join(map(str, octets)),
    }[form]
    dotted = str(ipaddress.IPv4Address(value))
    assert host_key(text) == host_key(f"{text}.:8080") == domain_of(text) == dotted
    assert host_of(normalize(f"http://{text}/")) == dotted


def _page_linking(src_url: str, dst_urls: list[str]) -> ParsedPage:
    src = FrontierEntry(url=src_url, fp=1, host=host_of(src_url), due_ms=0)
    page = ParsedPage(fetch=FetchResult(entry=src, outcome="fetched", url=src_url, status=200))
    page.links = [Link(url=u, fp=i + 2) for i, u in enumerate(dst_urls)]
    return page


@profile(200)
@given(hostile.randoms)
def test_keys_agree_for_every_url_normalize_accepts(rng) -> None:
    """10,000 hostile URLs (200 link sets of 50): every key derived from an accepted URL is
    valid, and all functions agree on it; every refused one is refused with a reason."""
    accepted = []
    for raw in hostile.hostile_urls(rng, 50):
        try:
            url = normalize(raw, "http://base.example/dir/page")
        except InvalidURL as exc:
            assert str(exc)  # a reason
            continue
        accepted.append(url)
        slot = host_of(url)
        _check_key(slot)
        key = host_key(slot)
        assert slot == key or slot.startswith(key + ":")
        assert not key.startswith("~")  # an accepted URL has a real host
        assert policy_key(url) == slot and policy_key(key) == key
        domain = domain_of(slot)
        assert key == domain or key.endswith("." + domain)
        assert 0 <= fetch_shard(slot, None, 64) < 64
    if not accepted:
        return
    page = _page_linking(accepted[0], accepted)
    columns = parquet_io.link_edge_columns(page)
    assert columns is not None
    assert columns["dst_host"] == [host_of(u) for u in accepted]
    assert columns["dst_domain"] == [domain_of(host_of(u)) for u in accepted]
    assert all(columns["src_domain"]) and all(columns["dst_domain"])
    src, linked = budget_stage.linked_domains(page)
    assert src and all(linked)
