"""The change model over HTTP: a live simweb subprocess with a small change scale and an explicit
epoch. Bodies and ETags change when the version does, conditional requests follow RFC 9110
(If-None-Match before If-Modified-Since), log lines carry the version, and sitemaps (gzipped
too) and feeds are served as the truth says."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from multidict import CIMultiDict

from beamcrawl.core.content import sitemaps
from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.simweb.changes import SeededChanges, http_date
from beamcrawl.simweb.server import build_parser, read_log_header
from beamcrawl.simweb.site import SimWeb
from beamcrawl.simweb.testing import SimwebHandle, running_simweb
from beamcrawl.simweb.truth import build_truth

UA = "Mozilla/5.0 (compatible; simweb-change-test/1.0)"
HOSTS, PAGES, SEED, SCALE = 24, 30, 5, 0.2


class Reply:
    def __init__(self, status: int, headers: CIMultiDict[str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


async def _fetch(port: int, host: str, path: str, headers: dict[str, str] | None, method: str) -> Reply:
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        hdrs = {"Host": f"{host}:{port}", "User-Agent": UA, **(headers or {})}
        async with session.request(method, f"http://127.0.0.1:{port}{path}", headers=hdrs, allow_redirects=False) as r:
            return Reply(r.status, CIMultiDict(r.headers), await r.read())


def fetch(sw: SimwebHandle, host: str, path: str, headers: dict[str, str] | None = None, method: str = "GET") -> Reply:
    return asyncio.run(_fetch(sw.port, host, path, headers, method))


@pytest.fixture(scope="module")
def sw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimwebHandle]:
    epoch = math.floor(time.time()) - 30.0 + 0.5  # explicit, and already half a minute old
    with running_simweb(
        tmp_path_factory.mktemp("simweb-changes"),
        hosts=HOSTS,
        seed=SEED,
        pages_per_host=PAGES,
        latency_scale=0,
        change_scale=SCALE,
        epoch=epoch,
    ) as handle:
        yield handle


@pytest.fixture(scope="module")
def model(sw: SimwebHandle) -> SimWeb:
    assert sw.epoch is not None
    return SimWeb(HOSTS, seed=SEED, pages_per_host=PAGES, port=sw.port, change_scale=SCALE, epoch=sw.epoch)


def _log_of(sw: SimwebHandle, host: str, path: str) -> dict[str, Any]:
    return [r for r in sw.requests() if r["host"] == host and r["path"] == path][-1]


def _page_of_class(model: SimWeb, cls: str, avoid: set[str] = frozenset()) -> tuple[int, str]:  # type: ignore[assignment]
    for hi in range(model.hosts):
        for j in range(model.pages_per_host):
            path = model.page_path(hi, j)
            if (
                model.change_class(hi, path) == cls
                and model.host(hi).robots.kind != "unavailable"
                and f"{hi}{path}" not in avoid
            ):
                return hi, path
    raise AssertionError(f"no {cls} page")


def test_handle_truth_and_log_header(sw: SimwebHandle, model: SimWeb) -> None:
    assert sw.change_scale == SCALE and sw.epoch is not None
    header = read_log_header(sw.log_path)
    assert header is not None and header["epoch"] == sw.epoch and header["change_scale"] == SCALE
    assert header["seed"] == SEED and header["port"] == sw.port
    truth = sw.truth()
    assert truth == build_truth(
        HOSTS, seed=SEED, pages_per_host=PAGES, port=sw.port, change_scale=SCALE, epoch=sw.epoch
    )
    assert all(rec["change_model"]["epoch"] == sw.epoch for rec in truth.values())
    # The header is not a request.
    assert all("host" in r for r in sw.requests())


def test_cli_flags() -> None:
    args = build_parser().parse_args("--change-scale 0.5 --epoch 1800000000.25".split())
    assert (args.change_scale, args.epoch) == (0.5, 1800000000.25)
    args = build_parser().parse_args([])
    assert (args.change_scale, args.epoch) == (0.0, None)


def test_body_and_etag_change_when_the_version_does(sw: SimwebHandle, model: SimWeb) -> None:
    hi, path = _page_of_class(model, "fast")
    host = model.names[hi]
    first = fetch(sw, host, path)
    rec1 = _log_of(sw, host, path)
    assert first.status == 200 and rec1["version"] == model.version_at(hi, path, rec1["start"])
    assert first.body == model.versioned_body(hi, path, rec1["version"])
    assert first.headers["Last-Modified"] == http_date(model.last_change(hi, path, rec1["start"]))
    # Wait for the next change (known from the model), then fetch again.
    nxt = model.change_times(hi, path, rec1["end"] + 60)[rec1["version"]]
    time.sleep(max(0.0, nxt - time.time()) + 0.05)
    second = fetch(sw, host, path)
    rec2 = _log_of(sw, host, path)
    assert rec2["version"] > rec1["version"] and rec2["version"] == model.version_at(hi, path, rec2["start"])
    assert second.body != first.body and second.headers["ETag"] != first.headers["ETag"]
    assert second.body == model.versioned_body(hi, path, rec2["version"])
    # A conditional request with the old ETag now gets the full new page.
    third = fetch(sw, host, path, {"If-None-Match": first.headers["ETag"]})
    assert third.status == 200 and third.body
    assert _log_of(sw, host, path)["version"] >= rec2["version"]


def test_conditional_requests_on_a_static_page(sw: SimwebHandle, model: SimWeb) -> None:
    hi, path = _page_of_class(model, "static")
    host = model.names[hi]
    full = fetch(sw, host, path)
    etag, lm = full.headers["ETag"], full.headers["Last-Modified"]
    assert lm == http_date(model.changes.version0_time)  # type: ignore[union-attr]
    assert etag.startswith('"') and etag.endswith('-v0"')

    def status(headers: dict[str, str], method: str = "GET") -> Reply:
        return fetch(sw, host, path, headers, method)

    r = status({"If-None-Match": etag})
    assert r.status == 304 and r.body == b"" and r.headers["ETag"] == etag and r.headers["Last-Modified"] == lm
    assert status({"If-None-Match": "W/" + etag}).status == 304  # weak comparison
    assert status({"If-None-Match": f'"nope", {etag}'}).status == 304
    assert status({"If-None-Match": "*"}).status == 304
    assert status({"If-Modified-Since": lm}).status == 304
    assert status({"If-Modified-Since": http_date(time.time())}).status == 304  # later date
    assert status({"If-Modified-Since": http_date(model.changes.version0_time - 1)}).status == 200  # type: ignore[union-attr]
    assert status({"If-Modified-Since": "garbage"}).status == 200
    # If-None-Match takes precedence over If-Modified-Since, both ways.
    assert status({"If-None-Match": '"nope"', "If-Modified-Since": lm}).status == 200
    assert status({"If-None-Match": etag, "If-Modified-Since": "Thu, 01 Jan 1970 00:00:00 GMT"}).status == 304
    assert status({"If-None-Match": etag}, "HEAD").status == 304
    logged = [r for r in sw.requests() if r["host"] == host and r["path"] == path]
    assert logged and all(r["version"] == 0 for r in logged)
    assert {r["status"] for r in logged} == {200, 304}
    assert all(r["bytes"] == 0 for r in logged if r["status"] == 304)


def test_if_modified_since_on_a_changing_page(sw: SimwebHandle, model: SimWeb) -> None:
    hi, path = _page_of_class(model, "slow")  # mean 12.8 s: usually still the same version
    host = model.names[hi]
    for _ in range(5):
        full = fetch(sw, host, path)
        rec = _log_of(sw, host, path)
        r = fetch(sw, host, path, {"If-Modified-Since": full.headers["Last-Modified"]})
        rec2 = _log_of(sw, host, path)
        if rec2["version"] == rec["version"]:
            # Same version: a 304, unless two versions share the Last-Modified second.
            v = rec["version"]
            cm: SeededChanges = model.changes  # type: ignore[assignment]
            key = model.change_key(hi, path)
            ambiguous = v > 0 and math.floor(cm.change_time(*key, v - 1)) == math.floor(cm.change_time(*key, v))  # type: ignore[misc]
            assert r.status == (200 if ambiguous else 304)
            assert rec2["status"] == r.status and rec2["version"] == v
            return
    pytest.fail("the slow page changed between every pair of requests")


def test_log_lines_carry_the_version_of_pages_only(sw: SimwebHandle, model: SimWeb) -> None:
    host = model.names[0]
    for path in ("/robots.txt", "/", "/r/3", "/err/1.html", "/nope"):
        fetch(sw, host, path)
    by_path = {r["path"]: r for r in sw.requests() if r["host"] == host}
    assert by_path["/"]["version"] == model.version_at(0, "/", by_path["/"]["start"])
    for path in ("/robots.txt", "/r/3", "/err/1.html", "/nope"):
        assert "version" not in by_path[path]
    for key in ("start", "end", "host", "path", "ua", "status", "bytes", "method"):
        assert key in by_path["/"]


def test_sitemaps_and_feeds_over_http(sw: SimwebHandle, model: SimWeb) -> None:
    truth = sw.truth()
    hosts = [h for h, rec in truth.items() if rec["sitemap_index"] and rec["robots"]["status"] == 200]
    assert hosts
    for host in hosts[:3]:
        rec = truth[host]
        hi = rec["index"]
        robots = fetch(sw, host, "/robots.txt")
        named = RobotsRules.parse(robots.body, "beamcrawl", robots.status).sitemaps()
        assert named[0] == rec["sitemap_index"] and named[1:] == rec["feeds"]
        origins = (rec["origin"],)
        index_reply = fetch(sw, host, "/sitemap_index.xml")
        index = sitemaps.parse(index_reply.body, rec["sitemap_index"], robots_origins=origins)
        assert [e.url for e in index.sitemaps] == rec["sitemap_files"]
        urls = []
        for child in index.sitemaps:
            path = child.url[len(rec["origin"]) :]
            reply = fetch(sw, host, path)
            assert reply.status == 200
            if path.endswith(".gz"):
                assert reply.headers["Content-Type"] in ("application/gzip", "application/x-gzip")
                assert reply.body[:2] == b"\x1f\x8b"
            doc = sitemaps.parse(reply.body, child.url, robots_origins=origins)
            assert doc.kind == "urlset" and doc.error is None
            served_at = _log_of(sw, host, path)["start"]
            for e in doc.urls:
                expected = (
                    model.last_change(hi, e.url[len(rec["origin"]) :], served_at)
                    if rec["lastmod_honest"]
                    else served_at
                )
                assert e.lastmod == math.floor(expected)
            urls.extend(e.url for e in doc.urls)
        assert set(urls) >= {rec["origin"] + p for p in rec["sitemap_only"]}
        for p in rec["sitemap_only"]:
            page = fetch(sw, host, p)
            assert page.status == 200 and "ETag" in page.headers
            assert _log_of(sw, host, p)["version"] == model.version_at(hi, p, _log_of(sw, host, p)["start"])
    feed_hosts = [(h, url) for h, rec in truth.items() for url in rec["feeds"]]
    assert feed_hosts
    for host, url in feed_hosts[:4]:
        path = url[len(truth[host]["origin"]) :]
        reply = fetch(sw, host, path)
        assert reply.status == 200
        doc = sitemaps.parse(reply.body, url)
        assert doc.kind == ("rss" if path.endswith(".rss") else "atom") and doc.urls
        assert "version" not in _log_of(sw, host, path)


def test_change_model_off_server_has_no_header_and_no_version(tmp_path: Path) -> None:
    with running_simweb(tmp_path, hosts=3, pages_per_host=5, latency_scale=0) as off:
        assert off.epoch is None and off.change_scale == 0.0
        host = off.hosts[0]
        fetch(off, host, "/")
        assert read_log_header(off.log_path) is None
        (rec,) = off.requests()
        assert "version" not in rec
        assert "change_model" not in off.truth()[host]
        text = Path(off.log_path).read_text()
        assert text.count("\n") == 1
