"""The one gate: every connection passes the address policy at the connector, IP literals too.

Refusals are shown by the crawler never connecting: ``connect_log`` (tests/conftest.py)
records every socket connection of the process and refuses any to a non-loopback address
before it is attempted, so nothing here sends traffic off this machine even if the gate
were broken. Only a loopback server on port 0 ever answers.
"""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.net.gate import AddressRefused, GatedConnector, open_session
from beamcrawl.core.net.netpolicy import ResolveRules, url_refusal
from beamcrawl.core.net.resolver import PolicyResolver

PACKAGE = Path(__file__).resolve().parents[3] / "beamcrawl"


class FlippingResolver(AbstractResolver):
    """A resolver with no policy of its own whose answers change over time (rebinding)."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.asked = 0

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[dict[str, Any]]:
        addr = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        return [{"hostname": host, "host": addr, "port": port, "family": socket.AF_INET, "proto": 0, "flags": 0}]

    async def close(self) -> None:
        pass


async def _serve() -> tuple[web.AppRunner, int]:
    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/{tail:.*}", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def _get_all(
    urls: list[str], allow_private: bool, resolver: AbstractResolver | None = None, **connector: Any
) -> list[str]:
    """GETs each URL through the crawler's session; returns 'ok' or the refusal per URL."""

    async def main() -> list[str]:
        runner, port = await _serve()
        session = open_session(resolver or PolicyResolver(ResolveRules(), allow_private), allow_private, **connector)
        out = []
        try:
            for url in urls:
                try:
                    async with session.get(url.replace("PORT", str(port))) as resp:
                        out.append(await resp.text())
                except AddressRefused as exc:
                    out.append(f"refused: {exc.reason}")
        finally:
            await session.close()
            await runner.cleanup()
        return out

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("url", "allow_private", "kind"),
    [
        ("http://169.254.169.254/latest/meta-data/", True, "link-local"),
        ("http://169.254.169.254/latest/meta-data/", False, "link-local"),
        ("http://[fe80::1]/", True, "link-local"),
        ("http://[::ffff:169.254.169.254]/", True, "link-local"),
        ("http://10.0.0.5/", False, "private"),
        ("http://192.168.1.1:8080/", False, "private"),
        ("http://127.0.0.1:PORT/", False, "loopback"),
        ("http://[::1]:PORT/", False, "loopback"),
    ],
)
def test_ip_literal_hosts_are_refused_before_any_socket(connect_log, url, allow_private, kind):
    (answer,) = _get_all([url], allow_private)
    assert answer.startswith(f"refused: {kind} address")
    assert connect_log == []


@pytest.mark.parametrize(
    ("rule", "allow_private", "kind"),
    [("169.254.169.254", True, "link-local"), ("10.2.3.4", False, "private"), ("127.0.0.1", False, "loopback")],
)
def test_a_name_the_resolver_refuses_is_a_refusal_not_a_dns_error(connect_log, rule, allow_private, kind):
    """A hop to another *name* (a robots.txt redirect, say) whose address the policy
    refuses is reported as refused, like an IP literal, not as a lookup failure."""
    resolver = PolicyResolver(ResolveRules([("alias.test", rule)]), allow_private)
    (answer,) = _get_all(["http://alias.test:PORT/"], allow_private, resolver=resolver)
    assert answer.startswith(f"refused: {kind} address {rule}")
    assert connect_log == []


def test_an_allowed_ip_literal_connects(connect_log):
    assert _get_all(["http://127.0.0.1:PORT/"], allow_private=True) == ["ok"]
    assert [host for host, _ in connect_log] == ["127.0.0.1"]


def test_the_connector_refuses_what_a_policy_free_resolver_answers(connect_log):
    """The gate does not trust the resolver: even a resolver with no policy at all (or an
    answer cached before the name moved) cannot lead a connection to a refused address."""
    resolver = FlippingResolver(["127.0.0.1", "169.254.10.1", "10.1.2.3"])
    answers = _get_all(
        ["http://moving.test:PORT/a", "http://moving.test:PORT/b", "http://moving.test:PORT/c"],
        allow_private=False, resolver=resolver, use_dns_cache=False, force_close=True,
    )  # fmt: skip
    assert answers[0].startswith("refused: loopback address 127.0.0.1")
    assert answers[1].startswith("refused: link-local address 169.254.10.1")
    assert answers[2].startswith("refused: private address 10.1.2.3")
    assert connect_log == []


def test_a_name_rebound_to_link_local_is_refused_at_the_next_connection(connect_log):
    """With private networks allowed, a name first answering loopback then link-local: the
    first request connects, the second is refused at the connector, not sent."""
    resolver = FlippingResolver(["127.0.0.1", "169.254.169.254"])
    answers = _get_all(
        ["http://rebind.test:PORT/1", "http://rebind.test:PORT/2"],
        allow_private=True, resolver=resolver, use_dns_cache=False, force_close=True,
    )  # fmt: skip
    assert answers[0] == "ok"
    assert answers[1].startswith("refused: link-local address 169.254.169.254 (cloud metadata endpoint)")
    assert [host for host, _ in connect_log] == ["127.0.0.1"]


def test_no_proxy_path_around_the_gate(connect_log):
    async def main() -> str:
        session = open_session(PolicyResolver(ResolveRules(), True), True)
        try:
            async with session.get("http://example.test/", proxy="http://127.0.0.1:9/"):
                return "sent"
        except AddressRefused as exc:
            return exc.reason
        finally:
            await session.close()

    assert asyncio.run(main()) == "the crawler connects to no proxy"
    assert connect_log == []


# Constructs that open a connection; outside the gate's module none may appear in the crawler.
_CONNECTING = re.compile(
    r"\b(ClientSession|TCPConnector|UnixConnector|create_connection|open_connection|urlopen|sock_connect)\s*\("
    r"|\baiohttp\.request\s*\(|\bsocket\.socket\s*\("
    r"|^\s*(import|from)\s+(requests|httpx|urllib3|http\.client|urllib\.request|pycurl)\b"
)
# Not the crawler's fetches: the gate itself, the synthetic web's own test client (loopback
# only), and the local services a crawl starts and probes on loopback (the Bigtable
# emulator, the Flink job server's port).
# Operator tooling that talks to its own local services (the emulator, the Flink job server and
# session cluster, the cluster's REST API the failover watch polls), never to the web.
_NOT_THE_CRAWLER = {
    "core/net/gate.py",
    "stores/emulator.py",
    "pipelines/flink.py",
    "pipelines/flink_cluster.py",
    "pipelines/flink_failover.py",
}


def test_every_connection_of_the_crawler_is_made_by_the_one_session_factory():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in _NOT_THE_CRAWLER or rel.startswith("simweb/"):
            continue
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _CONNECTING.search(line):
                offenders.append(f"{rel}:{no}: {line.strip()}")
    assert offenders == [], "connect through core/gate.open_session only:\n" + "\n".join(offenders)
    fetcher = (PACKAGE / "core" / "net" / "fetcher.py").read_text(encoding="utf-8")
    assert "open_session(" in fetcher


def test_the_gate_is_the_connector_the_fetcher_uses():
    from beamcrawl.core.runtime.config import CrawlConfig
    from beamcrawl.core.net.fetcher import HostCrawler

    async def main() -> Any:
        crawler = HostCrawler(CrawlConfig(out="/tmp/o", store="sqlite:///tmp/o"), lambda *a: None, 0.0)
        await crawler.open()
        try:
            assert crawler.session is not None
            return crawler.session.connector
        finally:
            await crawler.close()

    connector = asyncio.run(main())
    assert isinstance(connector, GatedConnector) and connector.allow_private_networks is False


@pytest.mark.parametrize(
    ("url", "allow_private", "refused"),
    [
        ("http://169.254.169.254/latest/", True, "link-local address 169.254.169.254 (cloud metadata endpoint)"),
        ("http://[::1]:8080/", False, "loopback address ::1"),
        ("http://[::1]:8080/", True, None),
        ("http://2130706433/", False, "loopback address 127.0.0.1"),  # dword form
        ("http://0x7f.1/", False, "loopback address 127.0.0.1"),  # hex and short forms
        ("http://10.0.0.1/", False, "private address 10.0.0.1"),
        ("http://example.com/", False, None),  # a name: only DNS can tell
        ("http://93.184.215.14/", False, None),
        ("not a url", False, None),
    ],
)
def test_url_refusal_names_the_reason_for_ip_literal_hosts(url, allow_private, refused):
    assert url_refusal(url, allow_private) == refused


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_url_refusal_is_total(text):
    for url, allow in ((f"http://{text}/", False), (text, True)):
        refused = url_refusal(url, allow)
        assert refused is None or (isinstance(refused, str) and refused)
