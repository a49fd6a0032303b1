"""Egress through the whole round: every path to a refused address is stopped at the gate.

Crawls (in process, FnApiRunner) of a small web on a loopback server whose robots.txt
files redirect to link-local and private addresses, name a sitemap on a private IP, and
whose page redirects to an IP literal; then a host whose DNS answer changes between rounds
(rebinding). Each runs once per store: embedded and the Bigtable emulator.

Nothing leaves this machine: ``connect_log`` (tests/conftest.py) records every connection
the process makes and refuses any to a non-loopback address before it is attempted. The
tests assert it saw loopback only, that each refused hop has a page event with
``outcome=refused`` and its reason, and that no WARC record comes from a refused address.

"Without the flag" needs a server the policy allows without --allow-private-networks,
and the only server a test may run is on loopback: ``loopback_is_public`` takes loopback
(only) out of the refused categories for those tests. Private, link-local and the rest of
the policy stay as they are.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import io
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.net import netpolicy
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.pipelines.crawl import crawl
from loopback import LoopbackServer, serving  # noqa: E402  (tests/loopback.py)

META = "http://169.254.169.254/latest/meta-data/"
ROBOTS = {
    # host: (status, headers, body) of its robots.txt
    "meta.test": (301, {"Location": META}, ""),
    "priv.test": (302, {"Location": "http://10.0.0.5/robots.txt"}, ""),
    "maps.test": (200, {}, "User-agent: *\nAllow: /\nSitemap: http://192.168.7.7/sitemap.xml\n"),
}
PAGES = {
    "/": "<html><body><a href='/redir'>on</a></body></html>",
}


class EgressWeb(LoopbackServer):
    """A loopback server for several host names (by Host header) with a request log."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        host = request.host.split(":")[0]
        self.log.append((host, request.path))
        if request.path == "/robots.txt":
            status, headers, body = ROBOTS.get(host, (404, {}, ""))
            return web.Response(status=status, headers=headers, text=body)
        if request.path == "/redir":  # a page redirect to an IP literal
            return web.Response(status=301, headers={"Location": "http://10.0.0.7/secret"})
        return web.Response(text=PAGES.get(request.path, "<html>leaf</html>"), content_type="text/html")


def egress_web() -> contextlib.AbstractContextManager[EgressWeb]:
    return serving(EgressWeb())


@pytest.fixture
def store_uri(both_stores: str) -> str:
    return both_stores


@pytest.fixture
def loopback_is_public(monkeypatch: pytest.MonkeyPatch) -> None:
    categories = tuple((name, nets) for name, nets in netpolicy._CATEGORIES if name != "loopback")
    assert len(categories) == len(netpolicy._CATEGORIES) - 1
    monkeypatch.setattr(netpolicy, "_CATEGORIES", categories)


def _cfg(tmp_path: Path, store: str, **kw: object) -> CrawlConfig:
    base: dict = dict(
        out=str(tmp_path / "out"), store=store, min_delay=0.05, round_window=2.0, fetch_shards=2,
        resolve=(("*.test", "127.0.0.1"),), allow_private_networks=False,
    )  # fmt: skip
    base.update(kw)
    return CrawlConfig(**base)


def _events(out: Path) -> list[dict]:
    rows: list[dict] = []
    for path in sorted(glob.glob(str(out / "pages" / "round=*" / "*.parquet"))):
        rows.extend(pq.read_table(path).to_pylist())
    return rows


def _warc_records(out: Path) -> list[tuple[str, str | None, str | None]]:
    """(type, target URI, IP address) of every WARC record written."""
    found = []
    for path in sorted(glob.glob(str(out / "warc" / "round=*" / "*.warc.gz"))):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                found.append((rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI"),
                              rec.rec_headers.get_header("WARC-IP-Address")))  # fmt: skip
    return found


def _refused(events: list[dict], url: str) -> dict:
    matches = [e for e in events if e["url"] == url]
    assert matches, f"no fetch event for {url}; events: {[(e['url'], e['outcome']) for e in events]}"
    (event,) = matches
    assert event["outcome"] == "refused", event
    assert event["blob"] is None and event["status"] is None
    return event


def _assert_nothing_from_refused_addresses(out: Path, connect_log: list[tuple[str, int]]) -> None:
    assert connect_log and {host for host, _ in connect_log} == {"127.0.0.1"}
    records = _warc_records(out)
    assert any(kind == "response" for kind, _, _ in records)
    for kind, uri, ip in records:
        if kind in ("request", "response", "revisit"):
            assert uri is not None and "://169.254." not in uri and "://10." not in uri and "://192.168." not in uri
            assert ip in (None, "127.0.0.1"), (kind, uri, ip)


def test_robots_and_sitemap_and_page_redirects_to_private_addresses_are_refused_without_the_flag(
    tmp_path, store_uri, connect_log, loopback_is_public
):
    with egress_web() as web_:
        cfg = _cfg(tmp_path, store_uri)
        seeds = [f"http://{h}:{web_.port}/" for h in ("meta.test", "priv.test", "maps.test", "plain.test")]
        printed = io.StringIO()
        reports = crawl(cfg, 3, seeds, ["--runner=FnApiRunner"], out=printed)
    out = tmp_path / "out"
    events = _events(out)
    meta = _refused(events, META)
    assert "link-local address 169.254.169.254 (cloud metadata endpoint)" in meta["error"]
    assert "private address 10.0.0.5" in _refused(events, "http://10.0.0.5/robots.txt")["error"]
    # The sitemap robots.txt names, on a private IP: queued, then refused when due.
    assert "private address 192.168.7.7" in _refused(events, "http://192.168.7.7/sitemap.xml")["error"]
    # The page redirect to an IP literal: the target is queued, then refused when due.
    assert "private address 10.0.0.7" in _refused(events, "http://10.0.0.7/secret")["error"]
    assert sum(r["refused"] for r in reports) >= 4
    assert "refused by address policy 1" in printed.getvalue()
    _assert_nothing_from_refused_addresses(out, connect_log)
    # The hosts whose robots.txt led nowhere fetched nothing else (no robots, no fetch).
    served = {(h, p) for h, p in web_.log}
    assert ("maps.test", "/") in served and any(p == "/redir" for _, p in served)
    assert not {p for h, p in served if h in ("meta.test", "priv.test")} - {"/robots.txt"}


def test_a_robots_redirect_to_link_local_is_refused_with_the_flag_too(tmp_path, store_uri, connect_log):
    with egress_web() as web_:
        cfg = _cfg(tmp_path, store_uri, allow_private_networks=True)
        crawl(cfg, 1, [f"http://meta.test:{web_.port}/"], ["--runner=FnApiRunner"], out=io.StringIO())
    out = tmp_path / "out"
    events = _events(out)
    assert "link-local address 169.254.169.254" in _refused(events, META)["error"]
    assert [e["outcome"] for e in events if e["url"].endswith("/robots.txt")] == ["fetched"]  # the 301 itself
    assert {host for host, _ in connect_log} == {"127.0.0.1"}
    assert all("169.254." not in (uri or "") for _, uri, _ in _warc_records(out))


def test_an_answer_allowed_when_cached_is_refused_when_the_flag_is_gone(tmp_path, store_uri, connect_log):
    """Round 1 (private networks allowed) fetches a.test on loopback and stores its answer
    for an hour. Round 2 runs without the flag: the stored answer is still fresh, and
    refused; nothing is sent."""
    with egress_web() as web_:
        url = f"http://a.test:{web_.port}/"
        first = _cfg(tmp_path, store_uri, allow_private_networks=True, dns_ttl=3600.0)
        crawl(first, 1, [url], ["--runner=FnApiRunner"], out=io.StringIO())
        fetched = len(connect_log)
        assert fetched >= 1
        second = dataclasses.replace(first, allow_private_networks=False)
        crawl(second, 1, [url + "again"], ["--runner=FnApiRunner"], out=io.StringIO())
        served = list(web_.log)
    events = _events(tmp_path / "out")
    assert "loopback address 127.0.0.1" in _refused(events, url + "again")["error"]
    assert len(connect_log) == fetched
    assert [p for _, p in served if p != "/robots.txt"] == ["/"]


@pytest.mark.parametrize(
    ("allow_private", "moved_to", "kind"),
    [(True, "169.254.7.7", "link-local"), (False, "10.9.9.9", "private")],
)
def test_a_name_rebound_between_rounds_is_refused(
    request, tmp_path, store_uri, connect_log, allow_private, moved_to, kind
):
    """Rebinding: b.test answers loopback in round 1 (for a second) and a refused address
    in round 2: link-local with private networks allowed, a private one without the flag
    (loopback counting as public there, see the module's docstring). Round 2 looks the name
    up again and refuses it: the page event says why, and no connection is attempted."""
    if not allow_private:
        request.getfixturevalue("loopback_is_public")
    with egress_web() as web_:
        url = f"http://b.test:{web_.port}/"
        first = _cfg(
            tmp_path, store_uri, allow_private_networks=allow_private, resolve=(("b.test", "127.0.0.1"),), dns_ttl=1.0
        )
        crawl(first, 1, [url], ["--runner=FnApiRunner"], out=io.StringIO())
        fetched = len(connect_log)
        assert fetched >= 1
        time.sleep(3.0)  # the stored answer (held to the end of round 1's window) expires
        second = dataclasses.replace(first, resolve=(("b.test", moved_to),))
        crawl(second, 1, [url + "moved"], ["--runner=FnApiRunner"], out=io.StringIO())
        served = list(web_.log)
    events = _events(tmp_path / "out")
    assert f"{kind} address {moved_to}" in _refused(events, url + "moved")["error"]
    assert len(connect_log) == fetched and {h for h, _ in connect_log} == {"127.0.0.1"}
    assert [p for _, p in served if p != "/robots.txt"] == ["/"]
