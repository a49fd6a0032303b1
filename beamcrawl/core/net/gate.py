"""The one gate every connection of the crawler passes: the address policy at the connector.

The resolver (core/net/resolver.py) applies the address policy to the answers it gives, but
aiohttp does not ask a resolver about an IP-literal host (``http://169.254.169.254/``,
``http://[::1]/``): a check that lives only there is skipped for such URLs, for example on a
robots.txt redirect hop. So the policy is applied again where the connection is made, to
the very addresses the socket is about to be opened to: :class:`GatedConnector` overrides
the connector's ``_resolve_host``, which aiohttp's direct connections (and a proxy's) call
for every host, IP literals included, and whose answer is the list the sockets are opened
to. Its own DNS cache is behind the check too, so an answer that changed since it was cached
(rebinding) is judged as it is now, at every connection.

:func:`open_session` is the only place the crawler makes an HTTP client session; the fetcher
fetches pages, robots.txt and its redirect hops, sitemaps and feeds through it.
tests/core/test_gate.py checks that no other module makes a session or a connector.

Governed by: --allow-private-networks (loopback and private addresses), never link-local.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import aiohttp

from beamcrawl.core.net.netpolicy import ForbiddenAddress, canonical_address, check_address
from beamcrawl.core.net.wire import OneAnswerConnector, no_retry

if TYPE_CHECKING:
    from aiohttp.abc import AbstractResolver, ResolveResult
    from aiohttp.client_reqrep import ClientRequest, ConnectionKey
    from aiohttp.connector import Connection
    from aiohttp.tracing import Trace

__all__ = ["AddressRefused", "GatedConnector", "open_session"]


class AddressRefused(aiohttp.ClientConnectionError):
    """The address policy refused a connection before any socket was opened.

    Attributes:
        host: The host of the request (a name or an IP literal).
        reason: Why, e.g. ``"link-local address 169.254.169.254 (cloud metadata endpoint)"``.
    """

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(f"refused address: {reason}")
        self.host = host
        self.reason = reason


class GatedConnector(OneAnswerConnector):
    """A TCPConnector that opens no socket to an address the policy refuses.

    Its connections also keep the wire discipline of :mod:`beamcrawl.core.net.wire` (an
    answer is read only while a request awaits it).

    Args:
        allow_private_networks: ``--allow-private-networks``; link-local stays refused.
        **kwargs: Passed to :class:`aiohttp.TCPConnector`.
    """

    def __init__(self, *, allow_private_networks: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.allow_private_networks = allow_private_networks
        self.refused = 0  # connections refused by this connector, for tests and metrics

    async def _resolve_host(self, host: str, port: int, traces: Sequence[Trace] | None = None) -> list[ResolveResult]:
        infos = await super()._resolve_host(host, port, traces=traces)
        for info in infos:
            try:
                check_address(str(info["host"]), self.allow_private_networks)
            except ForbiddenAddress as exc:
                self.refused += 1
                raise AddressRefused(host, str(exc)) from None
        if not infos:
            raise AddressRefused(host, "no address")
        return infos

    async def _get(self, key: ConnectionKey, traces: list[Trace]) -> Connection | None:
        # A kept-alive connection is to the address its host had when it was opened; the host's
        # address now (another one pinned since) is where its requests must go, so one to
        # another address is closed, not reused.
        while (conn := await super()._get(key, traces)) is not None:
            transport = conn.transport
            peer = transport.get_extra_info("peername") if transport is not None else None
            try:
                infos = await self._resolve_host(key.host, key.port or 0, traces=traces)
            except BaseException:
                conn.close()
                raise
            if peer and canonical_address(str(peer[0])) in {canonical_address(str(i["host"])) for i in infos}:
                return conn
            conn.close()
        return None

    async def _create_proxy_connection(self, req: ClientRequest, traces: list[Trace], timeout: Any) -> Any:
        # Through a proxy the connection to the target is the proxy's, out of the gate's sight.
        raise AddressRefused(str(req.url.host), "the crawler connects to no proxy")


def open_session(
    resolver: AbstractResolver, allow_private_networks: bool, **connector_args: Any
) -> aiohttp.ClientSession:
    """The crawler's HTTP client session, every connection of it through :class:`GatedConnector`.

    Call inside the event loop the session is used in.

    Args:
        resolver: The name resolver (the crawl's PolicyResolver).
        allow_private_networks: ``--allow-private-networks``.
        **connector_args: Connection limits and the like, for :class:`aiohttp.TCPConnector`.
    """
    connector = GatedConnector(
        allow_private_networks=allow_private_networks,
        resolver=resolver,
        # A crawler archives what servers send; whether to trust a certificate is a
        # question for the reader of the archive, so don't refuse on it.
        ssl=False,
        **connector_args,
    )
    return aiohttp.ClientSession(
        connector=connector,
        trust_env=False,  # no proxy from the environment: the gate must see the target
        auto_decompress=False,  # WARC records keep the bytes as transferred
        cookie_jar=aiohttp.DummyCookieJar(),
        skip_auto_headers=("User-Agent",),
        middlewares=(no_retry,),  # one request on the wire per request made (core/net/wire.py)
    )
