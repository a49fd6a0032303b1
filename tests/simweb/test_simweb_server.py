"""Tests of the running simweb server (subprocess), fetched with aiohttp and Host headers."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
from multidict import CIMultiDict

from beamcrawl.simweb import SimWeb, build_truth, host_names
from beamcrawl.simweb.server import build_parser
from beamcrawl.simweb.testing import SimwebHandle, running_simweb

UA = "Mozilla/5.0 (compatible; simweb-test/1.0)"
HOSTS = 40  # as in conftest.py
PAGES = 30


class Reply:
    """What a test needs from one response."""

    def __init__(self, status: int, headers: CIMultiDict[str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


async def _fetch_all(
    port: int,
    requests: list[tuple[str, str]],
    method: str = "GET",
    headers: dict[str, str] | None = None,
) -> list[Reply]:
    out = []
    async with aiohttp.ClientSession() as session:
        for host, path in requests:
            hdrs = {"Host": f"{host}:{port}", "User-Agent": UA, **(headers or {})}
            async with session.request(
                method, f"http://127.0.0.1:{port}{path}", headers=hdrs, allow_redirects=False
            ) as resp:
                out.append(Reply(resp.status, CIMultiDict(resp.headers), await resp.read()))
    return out


def fetch(sw: SimwebHandle, host: str, path: str, **kw: Any) -> Reply:
    return asyncio.run(_fetch_all(sw.port, [(host, path)], **kw))[0]


def fetch_many(sw: SimwebHandle, requests: list[tuple[str, str]], **kw: Any) -> list[Reply]:
    return asyncio.run(_fetch_all(sw.port, requests, **kw))


def _host_of_kind(sw: SimwebHandle, kind: str) -> str:
    return next(h for h, rec in sw.truth().items() if rec["robots"]["kind"] == kind)


def test_ready_handle(simweb: SimwebHandle) -> None:
    assert simweb.port > 0
    assert simweb.hosts == host_names(HOSTS, 1)
    assert simweb.base_url(simweb.hosts[0]) == f"http://{simweb.hosts[0]}:{simweb.port}/"
    assert set(simweb.truth()) == set(simweb.hosts)


def test_truth_file_matches_python_truth(simweb: SimwebHandle) -> None:
    expected = build_truth(HOSTS, seed=1, pages_per_host=PAGES, port=simweb.port)
    assert simweb.truth() == expected


def test_pages_are_deterministic(simweb: SimwebHandle) -> None:
    host = simweb.hosts[1]
    paths = ["/", "/p/1.html", SimWeb(HOSTS, 1, PAGES, simweb.port).page_path(1, 7)]
    first = fetch_many(simweb, [(host, p) for p in paths])
    second = fetch_many(simweb, [(host, p) for p in paths])
    model = SimWeb(HOSTS, seed=1, pages_per_host=PAGES, port=simweb.port)
    for path, a, b in zip(paths, first, second):
        assert a.status == 200 and b.status == 200
        assert a.body == b.body
        assert a.body == model.page_body(1, model.page_index(1, path))  # type: ignore[arg-type]
        assert a.headers["ETag"] == b.headers["ETag"]
    # Upper-case Host header and a port: same host.
    upper = fetch(simweb, host.upper(), "/")
    assert upper.body == first[0].body


def test_other_seed_differs(tmp_path: Path, simweb: SimwebHandle) -> None:
    with running_simweb(tmp_path, hosts=5, seed=2, pages_per_host=PAGES, truth=False) as other:
        assert other.hosts != simweb.hosts[:5]
        a = fetch(simweb, simweb.hosts[0], "/p/1.html")
        b = fetch(other, other.hosts[0], "/p/1.html")
        assert a.status == b.status == 200
        assert a.body != b.body
        assert other.stop() == 0  # clean exit on SIGTERM


def test_robots_variants(simweb: SimwebHandle) -> None:
    truth = simweb.truth()
    replies = fetch_many(simweb, [(h, "/robots.txt") for h in simweb.hosts])
    seen = set()
    for host, reply in zip(simweb.hosts, replies):
        robots = truth[host]["robots"]
        seen.add(robots["kind"])
        assert reply.status == robots["status"], host
        if robots["status"] == 200:
            assert reply.body.decode() == robots["text"]
            assert reply.headers["Content-Type"].startswith("text/plain")
        if robots["kind"] == "redirect":
            assert reply.headers["Location"] == robots["location"]
            real = fetch(simweb, host, "/robots-real.txt")
            assert real.status == 200 and real.body.decode() == robots["text"]
        if robots["sitemaps"]:
            assert any(line.startswith("Sitemap: ") for line in robots["text"].splitlines())
            sitemap = fetch(simweb, host, "/sitemap.xml")
            assert sitemap.status == 200 and b"<urlset" in sitemap.body
    assert {"none", "forbidden", "unavailable", "redirect", "agent_group", "wildcard"} <= seen
    assert {"allow_override", "crawl_delay", "crawl_delay_agent", "private_sitemap"} <= seen
    text = truth[_host_of_kind(simweb, "wildcard")]["robots"]["text"]
    assert "Disallow: /*.pdf$\r\n" in text and "Disallow: /docs/*/draft" in text
    delays = {rec["robots"]["crawl_delay_for_beamcrawl"] for rec in truth.values()}
    assert {None, 1.0, 2.0} == delays


def test_redirect_404_500_head_and_conditional(simweb: SimwebHandle) -> None:
    host = simweb.hosts[2]
    origin = f"http://{host}:{simweb.port}"
    model = SimWeb(HOSTS, seed=1, pages_per_host=PAGES, port=simweb.port)
    even, odd = fetch_many(simweb, [(host, "/r/4"), (host, "/r/5")])
    assert even.status == odd.status == 301
    assert even.headers["Location"] == origin + model.page_path(2, 4)
    assert odd.headers["Location"] == model.page_path(2, 5)
    missing, error, unknown = fetch_many(
        simweb, [(host, "/no/such/page.html"), (host, "/err/1.html"), (host, "/p/999999.html")]
    )
    assert (missing.status, error.status, unknown.status) == (404, 500, 404)
    head = fetch(simweb, host, "/", method="HEAD")
    assert head.status == 200 and head.body == b""
    full = fetch(simweb, host, "/")
    same = fetch(simweb, host, "/", headers={"If-None-Match": full.headers["ETag"]})
    assert same.status == 304 and same.body == b""
    assert fetch(simweb, "nosuch.example", "/").status == 404
    assert fetch(simweb, host, "/", method="POST").status == 405


def test_changing_page_and_trap(simweb: SimwebHandle) -> None:
    truth = simweb.truth()
    changing = next(h for h, rec in truth.items() if rec["changing"])
    a, b = fetch_many(simweb, [(changing, "/news.html"), (changing, "/news.html")])
    assert a.status == b.status == 200 and a.body != b.body
    trap = next(h for h, rec in truth.items() if rec["trap"])
    page = fetch(simweb, trap, "/cal/2024/12.html")
    assert page.status == 200 and b"../2025/01.html" in page.body


def test_slow_host_is_slow(simweb: SimwebHandle) -> None:
    truth = simweb.truth()
    slow = next(h for h, rec in truth.items() if rec["slow_ms"])
    t = time.monotonic()
    assert fetch(simweb, slow, "/p/1.html").status in (200, 404)
    assert time.monotonic() - t >= truth[slow]["slow_ms"] / 1000 * 0.9


def test_request_log(simweb: SimwebHandle) -> None:
    host = simweb.hosts[3]
    before = time.time()
    fetch(simweb, host, "/p/2.html?x=1")
    after = time.time()
    lines = [r for r in simweb.requests() if r["host"] == host and r["path"] == "/p/2.html?x=1"]
    assert lines, "request not logged"
    rec = lines[-1]
    assert set(rec) >= {"start", "end", "host", "path", "ua", "status", "bytes", "method"}
    assert before - 0.5 <= rec["start"] <= rec["end"] <= after + 0.5
    assert rec["ua"] == UA and rec["method"] == "GET"
    expected = fetch(simweb, host, "/p/2.html")
    assert rec["status"] == expected.status
    assert rec["bytes"] == len(expected.body)


def test_cli_parser_flags() -> None:
    args = build_parser().parse_args(
        "--port 8080 --hosts 3000 --log l --truth t --seed 7 --pages-per-host 100000 "
        "--bind 0.0.0.0 --latency-scale 0".split()
    )
    assert (args.port, args.hosts, args.seed, args.pages_per_host) == (8080, 3000, 7, 100000)
    assert (args.log, args.truth, args.bind, args.latency_scale) == ("l", "t", "0.0.0.0", 0.0)


def test_in_process_server(tmp_path: Path) -> None:
    """SimwebServer runs inside an existing event loop, and its log is complete once stopped."""
    from beamcrawl.simweb.server import SimwebServer
    from beamcrawl.simweb.testing import read_request_log

    log = tmp_path / "log.jsonl"

    async def run() -> tuple[int, int]:
        async with SimwebServer(hosts=3, pages_per_host=5, log_path=log) as server:
            assert server.web is not None
            host = server.web.names[0]
            replies = await _fetch_all(server.port, [(host, "/robots.txt"), (host, "/")])
        return replies[0].status, replies[1].status

    statuses = asyncio.run(run())
    assert statuses[1] == 200
    assert [r["path"] for r in read_request_log(log)] == ["/robots.txt", "/"]
