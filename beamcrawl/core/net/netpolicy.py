"""Which addresses the crawler may connect to, and test-time name mapping.

Safe by default: a crawler follows links written by strangers, so a link to
``http://169.254.169.254/`` (the cloud metadata endpoint) or to ``http://10.0.0.5/`` must not
reach into the network the crawler runs in. Link-local addresses are refused always; loopback,
private, shared, multicast, unspecified and reserved ones unless private networks are allowed
(tests, the demo, intranet crawls).

The policy is applied to the *resolved* address, after ``--resolve`` rules and DNS, so a public
name that resolves to a private address is refused too. IPv6 addresses that carry an IPv4
address (IPv4-mapped ``::ffff:a.b.c.d``, IPv4-compatible, IPv4-translated ``::ffff:0:a.b.c.d``,
NAT64 ``64:ff9b::/96`` and local-use ``64:ff9b:1::/48``, 6to4 ``2002::/16``, Teredo ``2001::/32``
with its server's and client's) are judged by that IPv4 address as well.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import socket
from collections.abc import Iterable, Iterator
from urllib.parse import urlsplit

__all__ = [
    "ForbiddenAddress",
    "ResolveRules",
    "canonical_address",
    "check_address",
    "name_refusal",
    "parse_resolve_rule",
    "url_refusal",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class ForbiddenAddress(ValueError):
    """The crawler must not connect to this address; ``str(exc)`` says why."""


def _nets(*specs: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(s) for s in specs)


# Always refused, whatever the flags (RFC 3927, RFC 4291).
_LINK_LOCAL = _nets("169.254.0.0/16", "fe80::/10")
_METADATA = ipaddress.ip_address("169.254.169.254")

# Refused unless private networks are allowed. Written out rather than taken from
# ipaddress.is_private & co., whose meaning has changed between Python releases.
_CATEGORIES: tuple[tuple[str, tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]], ...] = (
    ("unspecified", _nets("0.0.0.0/32", "::/128")),
    ("loopback", _nets("127.0.0.0/8", "::1/128")),
    ("private", _nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "fec0::/10")),
    ("shared (carrier-grade NAT)", _nets("100.64.0.0/10")),
    ("multicast", _nets("224.0.0.0/4", "ff00::/8")),
    (
        "reserved",
        _nets(
            "0.0.0.0/8",  # "this network"
            "192.0.0.0/24",  # IETF protocol assignments
            "192.0.2.0/24",  # documentation (TEST-NET-1)
            "192.88.99.0/24",  # former 6to4 relay anycast
            "198.18.0.0/15",  # benchmarking
            "198.51.100.0/24",  # documentation (TEST-NET-2)
            "203.0.113.0/24",  # documentation (TEST-NET-3)
            "240.0.0.0/4",  # reserved, and the limited broadcast address
            "100::/64",  # discard-only
            "2001::/23",  # IETF protocol assignments (less those below; Teredo is judged by its IPv4)
            "2001:2::/48",  # benchmarking
            "2001:10::/28",  # ORCHID
            "2001:20::/28",  # ORCHIDv2
            "2001:db8::/32",  # documentation
            "3fff::/20",  # documentation (RFC 9637)
        ),
    ),
)
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")
# The assignments in 2001::/23 the IANA registry marks globally reachable: anycast PCP, TURN
# and DNS-SD SRP servers, AMT, AS112, drone remote ID (RFC 7723, 8155, 9665, 7450, 7535, 9374).
_GLOBAL_IN_IETF_V6 = _nets(
    "2001:1::1/128", "2001:1::2/128", "2001:1::3/128", "2001:3::/32", "2001:4:112::/48", "2001:30::/28"
)  # fmt: skip
# Prefixes whose addresses end in the IPv4 address they are translated to: NAT64's well-known
# one (RFC 6052), and two that only a translator in the crawler's own network serves, NAT64's
# local-use block (RFC 8215) and SIIT's IPv4-translated addresses (RFC 2765). Those two are
# judged as IPv6 addresses too (reserved: not on the Internet).
_LOCAL_TRANSLATED = _nets("64:ff9b:1::/48", "::ffff:0:0:0/96")
_NAT64 = (*_nets("64:ff9b::/96"), *_LOCAL_TRANSLATED)
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address stands for or tunnels to, if any."""
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        # Teredo (RFC 4380): packets go to the client's IPv4 address (held inverted), by way
        # of its server's; both are the network a connection reaches into.
        server, client = address.teredo
        return (client, server)
    if any(address in net for net in _NAT64) or (
        address in _IPV4_COMPATIBLE and int(address) > 1  # not :: or ::1
    ):
        return (ipaddress.IPv4Address(int(address) & 0xFFFFFFFF),)
    return ()


def _parse_ip(ip: str) -> IPAddress:
    text = ip.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise ForbiddenAddress(f"not an IP address: {ip!r}") from None


def _refusal(address: IPAddress, allow_private: bool) -> str | None:
    """The kind of address that makes ``address`` refused (e.g. ``"loopback"``), or None."""
    if any(address in net for net in _LINK_LOCAL if net.version == address.version):
        return "link-local"
    if allow_private or any(address in net for net in _GLOBAL_IN_IETF_V6 if net.version == address.version):
        return None
    for name, nets in _CATEGORIES:
        if any(address in net for net in nets if net.version == address.version):
            return name
    if address.version == 6 and address not in _GLOBAL_UNICAST_V6:
        return "reserved"  # outside 2000::/3 nothing else is routable on the Internet
    return None


def canonical_address(ip: str) -> str:
    """The one spelling of an address, for the clocks and shards keyed by it.

    IPv6 is written compressed and in lower case, and an IPv4-mapped IPv6 address
    (``::ffff:a.b.c.d``, which a socket reaches over IPv4) as the IPv4 address it is. Total:
    a string that is no address comes back as it is (the policy refuses it).
    """
    try:
        address = _parse_ip(ip)
    except ForbiddenAddress:
        return ip
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None and not address.scope_id:
        return str(address.ipv4_mapped)
    return str(address)


def check_address(ip: str, allow_private: bool) -> None:
    """Refuses addresses the crawler must not connect to.

    Args:
        ip: An IPv4 or IPv6 address (brackets and an IPv6 zone id are accepted).
        allow_private: Allow loopback, private, shared, unspecified, multicast and reserved
            addresses (``--allow-private-networks``). Link-local ones stay refused.

    Raises:
        ForbiddenAddress: With the reason, e.g. ``"loopback address 127.0.0.1"``.
    """
    address = _parse_ip(ip)
    judged: IPAddress = address
    kind = None
    # An address that stands for an IPv4 one is judged as that IPv4 address: the mapped
    # form of 8.8.8.8 is fine, the mapped form of 169.254.169.254 is not.
    carried = _embedded_ipv4(address) if isinstance(address, ipaddress.IPv6Address) else ()
    for embedded in carried:
        kind = _refusal(embedded, allow_private)
        if kind is not None:
            judged = embedded
            break
    if kind is None and (not carried or any(address in net for net in _LOCAL_TRANSLATED)):
        kind = _refusal(address, allow_private)
    if kind is None:
        return
    message = f"{kind} address {judged}"
    if judged == _METADATA:
        message += " (cloud metadata endpoint)"
    if judged is not address:
        message += f" inside {address}"
    raise ForbiddenAddress(message)


def name_refusal(host: str, allow_private: bool) -> str | None:
    """Why the address policy refuses a host *name* before any DNS, or None.

    ``localhost`` and every name under ``.localhost`` are loopback by definition (RFC 6761
    §6.3: resolvers answer them with a loopback address, or not at all), so they are judged
    as the loopback address they stand for, as an IP literal is. Any other name returns None
    here: the connector judges its addresses when it connects (core/net/gate.py). Total: any
    string gives None or a reason.

    Args:
        host: A host name as a URL holds it (a port, a trailing dot and any case are ignored).
        allow_private: ``--allow-private-networks``.

    Returns:
        E.g. ``"loopback name localhost"``.
    """
    if allow_private:
        return None
    name = host.strip().lower()
    if not name.startswith("[") and name.count(":") == 1:
        name = name.partition(":")[0]
    name = name.rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return f"loopback name {name}"
    return None


def url_refusal(url: str, allow_private: bool) -> str | None:
    """Why the address policy refuses ``url`` by its host alone, or None.

    Only a host that *is* an address can be judged without DNS: an IP literal, IPv4 in any
    form ``inet_aton`` accepts (``2130706433``, ``0x7f.1``, ``127.1``), IPv6 in brackets.
    A host name returns None here; the connector judges its addresses when it connects
    (core/net/gate.py). Total: any string gives None or a reason, never an exception.

    Args:
        url: An absolute URL (anything else gives None).
        allow_private: ``--allow-private-networks``.

    Returns:
        E.g. ``"link-local address 169.254.169.254 (cloud metadata endpoint)"``.
    """
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    if not host:
        return None
    host = host.split("%", 1)[0].rstrip(".")  # an IPv6 zone id; a trailing dot
    try:
        address = str(ipaddress.ip_address(host))
    except ValueError:
        if ":" in host or not host or not all(c in "0123456789abcdefx." for c in host):
            return None
        try:
            address = socket.inet_ntoa(socket.inet_aton(host))  # legacy numeric IPv4 forms
        except (OSError, UnicodeError, ValueError):
            return None
    try:
        check_address(address, allow_private)
    except ForbiddenAddress as exc:
        return str(exc)
    return None


def parse_resolve_rule(spec: str) -> tuple[str, str]:
    """Parses a ``HOSTGLOB=IP`` rule (like curl's ``--resolve``).

    Args:
        spec: E.g. ``"*.simweb.test=127.0.0.1"`` or ``"site.test=[::1]"``.

    Returns:
        ``(glob, ip)`` with the glob lower-cased and the IP written canonically.

    Raises:
        ValueError: A one-line message naming the problem.
    """
    glob, sep, ip = spec.partition("=")
    glob = glob.strip().lower().rstrip(".")
    ip = ip.strip()
    if not sep:
        raise ValueError(f"bad resolve rule {spec!r}: expected HOSTGLOB=IP")
    if not glob:
        raise ValueError(f"bad resolve rule {spec!r}: empty host pattern")
    if any(c.isspace() for c in glob) or "/" in glob or ":" in glob:
        raise ValueError(f"bad resolve rule {spec!r}: host pattern {glob!r} is not a host name")
    if ip.startswith("[") and ip.endswith("]"):
        ip = ip[1:-1]
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        raise ValueError(f"bad resolve rule {spec!r}: {ip!r} is not an IP address") from None
    return glob, str(address)


class ResolveRules:
    """Host-name-to-address rules, tried in order; the first matching glob wins."""

    __slots__ = ("_compiled", "_rules")

    def __init__(self, rules: Iterable[tuple[str, str]] = ()) -> None:
        """Holds the rules.

        Args:
            rules: ``(glob, ip)`` pairs, e.g. from :func:`parse_resolve_rule`.
        """
        self._rules = tuple((glob.lower(), ip) for glob, ip in rules)
        # fnmatch.translate once, not per lookup; fnmatchcase semantics (we lower-case).
        self._compiled = tuple((re.compile(fnmatch.translate(glob)), ip) for glob, ip in self._rules)

    @classmethod
    def from_specs(cls, specs: Iterable[str]) -> ResolveRules:
        """Rules from ``HOSTGLOB=IP`` strings; raises ValueError on a bad one."""
        return cls(parse_resolve_rule(s) for s in specs)

    def lookup(self, host: str) -> str | None:
        """The mapped address for ``host`` (port and trailing dot ignored), or None."""
        if host.startswith("["):
            host = host[1 : host.find("]")] if "]" in host else host[1:]
        elif host.count(":") == 1:  # host:port; a bare IPv6 address has several colons
            host = host.partition(":")[0]
        host = host.lower().rstrip(".")
        for pattern, ip in self._compiled:
            if pattern.match(host):
                return ip
        return None

    @property
    def rules(self) -> tuple[tuple[str, str], ...]:
        """The ``(glob, ip)`` pairs in order."""
        return self._rules

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._rules)

    def __len__(self) -> int:
        return len(self._rules)

    def __bool__(self) -> bool:
        return bool(self._rules)

    def __repr__(self) -> str:
        return f"ResolveRules({list(self._rules)!r})"
