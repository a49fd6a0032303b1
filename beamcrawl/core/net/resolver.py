"""Host name to address, with the crawl's ``--resolve`` rules first and the address policy always.

One resolver serves both places that need addresses: the resolve stage before slot assignment
(transforms/resolve.py), which stores each host's answer in its host record so that fetch
shards can be keyed by server IP, and the fetcher's connector, which is *pinned* to the answer
in the record so that the address a host's requests go to is the address its politeness was
accounted to. Negative answers (no address, or only refused ones) are cached like positive
ones, for the same time.

The system resolver (``getaddrinfo`` on a thread, as aiohttp's ThreadedResolver does) is used
because it honours ``/etc/hosts`` and the local resolver configuration; it reports no TTL, so
answers are kept for a configured time (``--dns-ttl``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from dataclasses import dataclass, replace
from typing import Awaitable, Callable, Iterable

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from beamcrawl.core.urls import hostkeys
from beamcrawl.core.net.gate import AddressRefused
from beamcrawl.core.net.netpolicy import ForbiddenAddress, ResolveRules, canonical_address, check_address

__all__ = ["FetchRefused", "PolicyResolver", "Resolution", "hostname_of", "resolve_many"]

Lookup = Callable[[str], Awaitable[list[str]]]
# How an answer refused by the address policy starts (``Resolution.error``).
REFUSED = "refused address: "


class FetchRefused(Exception):
    """The crawler must not connect to this host (address policy or DNS failure)."""


@dataclass(frozen=True)
class Resolution:
    """One host's DNS answer as the crawl may use it.

    Attributes:
        addrs: Allowed addresses, preferred first (empty when ``error`` is set).
        error: Why there is no usable address (``"dns: ..."`` or ``"refused address: ..."``).
        resolved_at: Epoch seconds of the answer.
        ttl: Seconds the answer (positive or negative) may be used.
    """

    addrs: tuple[str, ...]
    error: str | None
    resolved_at: float
    ttl: float

    @property
    def ip(self) -> str | None:
        """The address requests go to (and politeness is accounted to), if any."""
        return self.addrs[0] if self.addrs else None

    @property
    def expires(self) -> float:
        return self.resolved_at + self.ttl


# The bare host name of a politeness slot key (``host`` or ``host:port``, IPv6 in []): one
# definition for every host key, in hostkeys.
hostname_of = hostkeys.hostname_of


class PolicyResolver(AbstractResolver):
    """DNS with the crawl's --resolve rules first and the address policy always applied.

    Also an aiohttp resolver (:meth:`resolve`), so a connector built on it can only ever reach
    addresses the policy allows, and only the answer's first (:attr:`Resolution.ip`, the pinned
    one when a host record supplied it), the address politeness is accounted to.

    Args:
        rules: ``--resolve`` rules, tried before DNS.
        allow_private: ``--allow-private-networks``.
        ttl: Seconds to keep an answer (positive or negative).
        lookup: The DNS lookup (name to addresses; raises OSError when there are none);
            default the system resolver. Tests pass a fake to count lookups.
    """

    def __init__(
        self,
        rules: ResolveRules,
        allow_private: bool,
        ttl: float = 300.0,
        lookup: Lookup | None = None,
    ) -> None:
        self._rules = rules
        self._allow_private = allow_private
        self._ttl = ttl
        self._cache: dict[str, Resolution] = {}
        self._pending: dict[str, asyncio.Future[Resolution]] = {}  # lookups under way, by host
        self._system: aiohttp.ThreadedResolver | None = None
        self._lookup_fn = lookup

    def pin(self, host: str, ip: str | None, error: str | None, resolved_at: float, ttl: float) -> None:
        """Uses a stored answer for ``host`` until it expires (the policy is checked again:
        the flags of this run decide, not those of the run that stored it)."""
        if ip is not None:
            ip = canonical_address(ip)
        if error is None and ip is not None:
            try:
                check_address(ip, self._allow_private)
            except ForbiddenAddress as exc:
                error = f"{REFUSED}{exc}"
        addrs = (ip,) if error is None and ip is not None else ()
        if not addrs and error is None:
            return  # nothing usable stored: resolve afresh
        self._cache[host] = Resolution(addrs, error, resolved_at, ttl)

    def hold(self, host: str, until: float) -> None:
        """Keeps the answer given for ``host`` at least until ``until`` (epoch seconds): the
        connector then connects to the address a caller judged, not to a later lookup's."""
        answer = self._cache.get(host)
        if answer is not None and answer.expires < until:
            self._cache[host] = replace(answer, ttl=until - answer.resolved_at)

    async def resolution(self, host: str) -> Resolution:
        """The answer for ``host`` (cached while fresh); never raises.

        Callers that ask at once share one lookup: each lookup of a name may answer another
        address (round-robin DNS, rebinding), and the address one caller judged (the host's
        crawl, a robots.txt hop) must be the one the connector, asking next, connects to.
        """
        now = time.time()
        cached = self._cache.get(host)
        if cached is not None and now < cached.expires:
            return cached
        pending = self._pending.get(host)
        if pending is None or pending.done() or pending.get_loop() is not asyncio.get_running_loop():
            pending = self._pending[host] = asyncio.ensure_future(self._answer(host, now, cached))
            pending.add_done_callback(
                lambda done: self._pending.pop(host, None) if self._pending.get(host) is done else None
            )
        return await asyncio.shield(pending)

    async def _answer(self, host: str, now: float, before: Resolution | None) -> Resolution:
        try:
            # One spelling per address: ::ffff:a.b.c.d is the server a.b.c.d, on its one clock.
            addrs = list(dict.fromkeys(canonical_address(addr) for addr in await self._lookup(host)))
            for addr in addrs:
                check_address(addr, self._allow_private)
            answer = Resolution(tuple(addrs), None, now, self._ttl)
        except ForbiddenAddress as exc:
            answer = Resolution((), f"{REFUSED}{exc}", now, self._ttl)
        except (OSError, UnicodeError) as exc:  # negative answers are cached too
            # getaddrinfo raises UnicodeError for a name IDNA cannot encode (an empty or
            # over-long label): that is the name's answer, not the round's failure.
            answer = Resolution((), f"dns: {exc}", now, self._ttl)
        if not answer.addrs and answer.error is None:
            answer = Resolution((), "dns: no address", now, self._ttl)
        current = self._cache.get(host)
        if current is not before and current is not None and time.time() < current.expires:
            return current  # pinned while the lookup was under way: the pin stands
        self._cache[host] = answer
        return answer

    async def addresses(self, host: str) -> list[str]:
        """Allowed addresses for ``host``; raises FetchRefused naming why there are none."""
        answer = await self.resolution(host)
        if answer.error is not None:
            raise FetchRefused(answer.error)
        return list(answer.addrs)

    async def _lookup(self, host: str) -> list[str]:
        bare = host.strip("[]")
        try:
            ipaddress.ip_address(bare)
            return [bare]
        except ValueError:
            pass
        mapped = self._rules.lookup(bare)
        if mapped:
            return [mapped]
        if self._lookup_fn is not None:
            return await self._lookup_fn(bare)
        if self._system is None:
            self._system = aiohttp.ThreadedResolver()
        infos = await self._system.resolve(bare, 0, socket.AF_UNSPEC)
        return list(dict.fromkeys(info["host"] for info in infos))

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[ResolveResult]:
        answer = await self.resolution(host)
        if answer.error is not None:
            if answer.error.startswith(REFUSED):  # the policy, not DNS trouble: say so
                raise AddressRefused(host, answer.error[len(REFUSED) :])
            raise OSError(answer.error)
        # Only the address politeness is accounted to (``answer.ip``): given the others too,
        # the connector went on to them when it failed (refused, or slow to connect), and the
        # request reached a server whose --ip-delay clock is another's, in another shard.
        addrs = list(answer.addrs[:1])
        return [
            {
                "hostname": host,
                "host": addr,
                "port": port,
                "family": socket.AF_INET6 if ":" in addr else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for addr in addrs
        ]

    async def close(self) -> None:
        if self._system is not None:
            await self._system.close()


async def resolve_many(resolver: PolicyResolver, hosts: Iterable[str], concurrency: int = 256) -> dict[str, Resolution]:
    """Resolves many host names at once (at most ``concurrency`` lookups in flight).

    Returns ``{host: Resolution}``; one failing lookup never stops the others.
    """
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(host: str) -> tuple[str, Resolution]:
        async with gate:
            return host, await resolver.resolution(host)

    pairs = await asyncio.gather(*(one(h) for h in dict.fromkeys(hosts)))
    return dict(pairs)
