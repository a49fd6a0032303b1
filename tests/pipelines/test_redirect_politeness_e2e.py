"""Every hop is its host's request, end to end: redirects from many hosts to one (issue #24).

A raw asyncio server on 127.0.0.1 serves eleven virtual hosts. Ten source hosts send their
robots.txt and their home page, by 301, to ``ok.redir.test``, half of them spelling it
``OK.REDIR.TEST.``; ``ok.redir.test`` serves a robots.txt that forbids ``/private`` and a few
pages. Three rounds run through the CLI with the default fetch shards, so most sources are
in another shard than the target. The server's own log must show, for ``ok.redir.test``
across all rounds: one request in flight at a time and its delay kept between them; and the
sources fetched under the target's robots.txt rules (their ``/private`` pages never asked).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from loopback import AnsweringServer  # tests/loopback.py

SOURCES = tuple(f"src{i}.redir.test" for i in range(10))
TARGET = "ok.redir.test"
MIN_DELAY = 0.3
# The server books a response's end after its last byte is handed to the socket; on a
# loaded machine that can trail what the client saw by ~10-15 ms (tests/pipelines/
# test_politeness_e2e.py measured 12 ms).
SERVER_END_LAG = 0.015


class RedirectWeb(AnsweringServer):
    """Raw HTTP/1.1 on loopback that logs ``(host, path, start, end)`` of every request."""

    def __init__(self) -> None:
        super().__init__()

    def _answer(self, host: str, path: str) -> tuple[int, list[str], bytes]:
        if host in SOURCES:
            spelling = "OK.REDIR.TEST." if int(host[3]) % 2 else TARGET
            if path in ("/robots.txt", "/"):
                target = "/robots.txt" if path == "/robots.txt" else f"/from-{host.split('.')[0]}"
                return 301, [f"Location: http://{spelling}:{self.port}{target}"], b""
            return 200, ["Content-Type: text/html"], b"<html><body>source page</body></html>"
        if host == TARGET:
            if path == "/robots.txt":
                return 200, ["Content-Type: text/plain"], b"User-agent: *\nDisallow: /private\n"
            return 200, ["Content-Type: text/html"], b"<html><body>target page</body></html>"
        return 404, ["Content-Type: text/plain"], b"no such host"


@pytest.fixture(scope="module")
def redirect_crawl(tmp_path_factory):
    work = tmp_path_factory.mktemp("redirects")
    with RedirectWeb() as web:
        seeds = [f"http://{h}:{web.port}{p}" for h in SOURCES for p in ("/", "/page", "/private/x")]
        seeds.append(f"http://{TARGET}:{web.port}/")
        (work / "seeds.txt").write_text("\n".join(seeds) + "\n")
        cmd = [
            sys.executable, "-m", "beamcrawl.cli.main", "crawl", "--seeds", str(work / "seeds.txt"),
            "--out", str(work / "out"), "--rounds", "3", "--resolve", "*=127.0.0.1", "--allow-private-networks",
            "--min-delay", str(MIN_DELAY), "--round-window", "8", "--runner", "FnApiRunner", "--exit-when-idle",
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        log = sorted(web.log, key=lambda r: r[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return log


@pytest.mark.e2e
@pytest.mark.slow
def test_the_target_host_has_one_request_in_flight_and_its_delay_kept(redirect_crawl):
    target = [r for r in redirect_crawl if r[0] == TARGET]
    hops = [r for r in target if r[1] == "/robots.txt"]
    assert len(hops) >= 1 + len(SOURCES)  # its own robots.txt and every source's hop
    assert any(r[1].startswith("/from-") for r in target)  # page redirects, queued for it
    for (_h, p1, _s1, end1), (_h2, p2, start2, _e2) in zip(target, target[1:]):
        assert start2 >= end1 - SERVER_END_LAG, f"two requests in flight to {TARGET}: {p1}, {p2}"
        assert start2 - end1 >= MIN_DELAY - SERVER_END_LAG, f"{TARGET}'s delay not kept: {p1} -> {p2}"


@pytest.mark.e2e
@pytest.mark.slow
def test_sources_are_crawled_under_the_rules_their_robots_redirect_leads_to(redirect_crawl):
    asked = {(h, p) for h, p, _s, _e in redirect_crawl}
    assert not {p for h, p in asked if h in SOURCES and p.startswith("/private")}
    assert {h for h, p in asked if p == "/page"} == set(SOURCES)
