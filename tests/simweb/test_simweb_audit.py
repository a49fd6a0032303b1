"""Tests of the politeness audit: it must pass clean crawls and catch every kind of violation."""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import aiohttp
import pytest

from beamcrawl.simweb.audit import ReferenceRobotsRules, audit, host_policy
from beamcrawl.simweb.testing import SimwebHandle

UA = "Mozilla/5.0 (compatible; beamcrawl/0.1.0; +https://example.org/bot)"

TRUTH: dict[str, dict[str, Any]] = {
    "a.com": {
        "host": "a.com",
        "robots": {"status": 200, "text": "User-agent: *\nDisallow: /private/\n"},
    },
    "down.org": {"host": "down.org", "robots": {"status": 503, "text": ""}},
    "slow.net": {
        "host": "slow.net",
        "robots": {
            "status": 200,
            "text": "User-agent: *\nDisallow: /x/\n\nUser-agent: beamcrawl\nCrawl-delay: 2\nDisallow: /y/\n",
        },
    },
    "moved.co.uk": {
        "host": "moved.co.uk",
        "robots": {
            "status": 301,
            "location": "http://moved.co.uk:8080/robots-real.txt",
            "final_status": 200,
            "text": "User-agent: *\nDisallow: /docs/\n",
        },
    },
    "none.de": {"host": "none.de", "robots": {"status": 404, "text": ""}},
}


def req(host: str, path: str, start: float, duration: float = 0.05, ua: str = UA, status: int = 200) -> dict[str, Any]:
    return {
        "start": start,
        "end": start + duration,
        "host": host,
        "path": path,
        "ua": ua,
        "status": status,
        "bytes": 100,
        "method": "GET",
    }


def clean_crawl() -> list[dict[str, Any]]:
    """A polite crawl: robots first, 1 s gaps (2 s on slow.net), only allowed paths."""
    t0 = 1_700_000_000.0
    reqs = [
        req("a.com", "/robots.txt", t0),
        req("a.com", "/", t0 + 1.0),
        req("a.com", "/p/1.html?x=1", t0 + 2.0),
        req("a.com", "/private", t0 + 3.0),  # no trailing slash: not covered by /private/
        req("down.org", "/robots.txt", t0, status=503),
        req("slow.net", "/robots.txt", t0 + 0.1),
        req("slow.net", "/", t0 + 2.1),
        req("slow.net", "/p/2.html", t0 + 4.2),
        req("moved.co.uk", "/robots.txt", t0, status=301),
        req("moved.co.uk", "/robots-real.txt", t0 + 1.0),
        req("moved.co.uk", "/p/3.html", t0 + 2.0),
        req("none.de", "/robots.txt", t0, status=404),
        req("none.de", "/private/1.html", t0 + 1.0),
    ]
    random.Random(1).shuffle(reqs)  # order of the log must not matter
    return reqs


def test_clean_crawl_passes() -> None:
    report = audit(clean_crawl(), TRUTH, "beamcrawl", min_delay=1.0)
    assert report.violations == 0, report.summary()
    assert report.ok
    assert report.total_requests == 13
    assert report.distinct_hosts == 5
    assert report.requests_per_host["a.com"] == 4
    assert report.min_gap == pytest.approx(1.0)
    assert report.request_rate > 0
    assert "OK" in report.summary()
    json.dumps(report.to_dict())


def test_overlap_fails() -> None:
    reqs = [*clean_crawl(), req("a.com", "/p/9.html", 1_700_000_000.0 + 4.0, duration=1.5)]
    reqs.append(req("a.com", "/p/10.html", 1_700_000_000.0 + 5.2))  # gap ok, but still in flight
    report = audit(reqs, TRUTH, min_delay=1.0)
    assert report.overlaps == 1
    assert report.short_gaps == 0
    assert report.violations == 1
    assert not report.ok
    assert report.overlap_examples[0]["path"] == "/p/10.html"
    assert "VIOLATION" in report.summary()


def test_short_gap_fails() -> None:
    reqs = [*clean_crawl(), req("a.com", "/p/9.html", 1_700_000_000.0 + 3.5)]
    report = audit(reqs, TRUTH, min_delay=1.0)
    assert report.short_gaps >= 1
    assert report.violations >= 1
    assert report.min_gap == pytest.approx(0.5)
    assert report.min_gap_host == "a.com"


def test_crawl_delay_of_the_token_group_applies() -> None:
    t0 = 1_700_000_000.0
    reqs = [req("slow.net", "/robots.txt", t0), req("slow.net", "/", t0 + 1.5)]
    report = audit(reqs, TRUTH, min_delay=1.0)
    assert report.short_gaps == 1
    assert report.short_gap_examples[0]["required"] == 2.0
    # Another token falls back to the * group, which has no Crawl-delay.
    other = [dict(r, ua="otherbot/2.0") for r in reqs]
    assert audit(other, TRUTH, agent_token="otherbot", min_delay=1.0).ok


def test_tolerance() -> None:
    t0 = 1_700_000_000.0
    reqs = [req("a.com", "/robots.txt", t0, duration=0.01), req("a.com", "/", t0 + 0.995)]
    assert audit(reqs, TRUTH, min_delay=1.0).short_gaps == 1
    assert audit(reqs, TRUTH, min_delay=1.0, tolerance=0.01).ok


@pytest.mark.parametrize(
    ("host", "path"),
    [
        ("a.com", "/private/1.html"),
        ("a.com", "/private/?q=1"),
        ("down.org", "/"),  # robots.txt answered 503: nothing else may be fetched
        ("moved.co.uk", "/docs/a.html"),  # rules come from the redirect target
        ("slow.net", "/y/z"),  # the token's own group, not the * group
    ],
)
def test_disallowed_path_fails(host: str, path: str) -> None:
    reqs = [*clean_crawl(), req(host, path, 1_700_000_000.0 + 10.0)]
    report = audit(reqs, TRUTH, min_delay=1.0)
    assert report.robots_violations == 1, report.summary()
    assert report.robots_violation_examples[0]["path"] == path
    assert report.violations == 1


def test_robots_not_first_fails() -> None:
    t0 = 1_700_000_000.0
    reqs = [req("a.com", "/", t0), req("a.com", "/robots.txt", t0 + 1.0)]
    report = audit(reqs, TRUTH, min_delay=1.0)
    assert report.robots_not_first == 1
    assert report.violations == 1
    assert report.robots_not_first_examples[0]["first_path"] == "/"


def test_redirect_target_counts_as_robots() -> None:
    t0 = 1_700_000_000.0
    reqs = [req("moved.co.uk", "/robots-real.txt", t0), req("moved.co.uk", "/", t0 + 1.0)]
    assert audit(reqs, TRUTH, min_delay=1.0).ok


def test_other_agents_are_ignored() -> None:
    t0 = 1_700_000_000.0
    noise = [req("a.com", "/private/x", t0 + i * 0.01, ua="curl/8.0") for i in range(20)]
    report = audit([*clean_crawl(), *noise], TRUTH, min_delay=1.0)
    assert report.ok
    assert report.ignored_requests == 20
    assert report.total_requests == 13


def test_unknown_hosts_still_checked_for_timing() -> None:
    t0 = 1_700_000_000.0
    reqs = [req("x.example", "/robots.txt", t0), req("X.example:8080", "/", t0 + 0.2)]
    report = audit(reqs, TRUTH, min_delay=1.0)
    assert report.unknown_hosts == ["x.example"]
    assert report.short_gaps == 1
    assert report.robots_violations == 0


def test_truth_as_records() -> None:
    report = audit(clean_crawl(), list(TRUTH.values()), min_delay=1.0)
    assert report.ok


ROBOTS = """\ufeff# comment
User-agent: otherbot
Disallow: /

User-agent: examplebot
User-Agent: BeamCrawl/1.0  # shares a group
Allow: /p/
Disallow: /p/2.html
Disallow: /*.pdf$
Disallow: /docs/*/draft
Allow: /tie
Disallow: /tie
Crawl-delay: 1.5

Sitemap: http://x/sitemap.xml

User-agent: *
Disallow: /
"""


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/", True),
        ("/robots.txt", True),
        ("/p/1.html", True),
        ("/p/2.html", False),  # longer Disallow beats shorter Allow
        ("/p/2.html?x", False),
        ("/files/a.pdf", False),
        ("/files/a.pdf?download=1", True),  # $ anchors the end
        ("/files/a.PDF", True),  # case-sensitive paths
        ("/docs/guide/draft-3.html", False),
        ("/docs/draft", True),
        ("/tie", True),  # equal length: Allow wins
        ("/tiebreak", True),
    ],
)
def test_robots_rules(path: str, allowed: bool) -> None:
    rules = ReferenceRobotsRules.parse(ROBOTS, "beamcrawl")
    assert rules.allowed(path) is allowed
    assert rules.crawl_delay == 1.5


def test_robots_group_selection() -> None:
    # No group for the token: the * group applies.
    star = ReferenceRobotsRules.parse(ROBOTS, "unknownbot")
    assert not star.allowed("/p/1.html")
    assert star.allowed("/robots.txt")
    # Several groups for the token are combined.
    merged = ReferenceRobotsRules.parse(
        "User-agent: beamcrawl\nDisallow: /a\n\nUser-agent: *\nDisallow: /b\n\nUser-agent: beamcrawl\nDisallow: /c\n",
        "beamcrawl",
    )
    assert not merged.allowed("/a") and not merged.allowed("/c") and merged.allowed("/b")
    # An empty Disallow allows everything; CRLF line ends parse.
    assert ReferenceRobotsRules.parse("User-agent: *\r\nDisallow:\r\n", "beamcrawl").allowed("/x")


def test_host_policy_statuses() -> None:
    assert host_policy({"status": 404}).allows("/anything")
    assert host_policy({"status": 403}).allows("/anything")
    assert not host_policy({"status": 500}).allows("/anything")
    assert host_policy({"status": 500}).allows("/robots.txt")
    moved = host_policy(TRUTH["moved.co.uk"]["robots"])
    assert moved.is_robots("/robots-real.txt") and not moved.allows("/docs/")


@pytest.mark.parametrize("target", ["/robots.txt?x=1", "/robots.txt?", "/robots.txt?/robots.txt"])
def test_robots_txt_with_a_query_is_judged_by_the_rules(target: str) -> None:
    """RFC 9309 §2.2.2 allows the URI /robots.txt; with a query it is another target, and the
    audit judges it by the rules (it let any query through, so a crawler that did the same
    passed)."""
    star = ReferenceRobotsRules.parse(ROBOTS, "unknownbot")  # Disallow: /
    assert star.allowed("/robots.txt") and not star.allowed(target)
    assert not host_policy({"status": 500}).allows(target) and host_policy({"status": 500}).allows("/robots.txt")
    truth = {"shut.test": {"host": "shut.test", "robots": {"status": 200, "text": "User-agent: *\nDisallow: /\n"}}}
    t0 = 1_700_000_000.0
    report = audit([req("shut.test", "/robots.txt", t0), req("shut.test", target, t0 + 1)], truth, min_delay=1.0)
    assert report.robots_violations == 1 and report.robots_violation_examples[0]["path"] == target
    assert audit([req("shut.test", "/robots.txt", t0)], truth, min_delay=1.0).ok


async def _polite_probe(sw: SimwebHandle, hosts: list[str], ua: str, gap: float) -> None:
    """A tiny polite client: per host, robots.txt first, then allowed pages, `gap` apart."""
    truth = sw.truth()

    async def one_host(session: aiohttp.ClientSession, host: str) -> None:
        policy = host_policy(truth[host]["robots"], "auditprobe")
        targets = ["/robots.txt"]
        if truth[host]["robots"].get("location"):
            targets.append("/robots-real.txt")
        targets += [p for p, e in truth[host]["pages"].items() if policy.allows(p)][:3]
        for i, target in enumerate(targets):
            if i:
                await asyncio.sleep(gap)
            async with session.get(
                f"http://127.0.0.1:{sw.port}{target}",
                headers={"Host": host, "User-Agent": ua},
                allow_redirects=False,
            ) as resp:
                await resp.read()

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(one_host(session, h) for h in hosts))


def test_audit_of_a_live_crawl(simweb: SimwebHandle) -> None:
    """End to end: the server's log and truth feed the audit; polite passes, a burst fails."""
    ua = "auditprobe/1.0"
    truth = simweb.truth()
    kinds = ("private", "wildcard", "unavailable", "redirect", "none")
    hosts = [next(h for h, r in truth.items() if r["robots"]["kind"] == k) for k in kinds]
    asyncio.run(_polite_probe(simweb, hosts, ua, gap=0.15))
    time.sleep(0.05)
    report = audit(simweb.requests(), truth, agent_token="auditprobe", min_delay=0.1)
    assert report.distinct_hosts == len(hosts)
    assert report.ok, report.summary()

    # Now misbehave on the "private" host: no pause, and a disallowed path.
    async def burst() -> None:
        async with aiohttp.ClientSession() as session:
            for target in ("/p/1.html", "/private/4.html"):
                async with session.get(
                    f"http://127.0.0.1:{simweb.port}{target}",
                    headers={"Host": hosts[0], "User-Agent": ua},
                ) as resp:
                    await resp.read()

    asyncio.run(burst())
    report = audit(simweb.requests(), truth, agent_token="auditprobe", min_delay=0.1)
    assert report.robots_violations == 1, report.summary()
    assert report.short_gaps >= 1
    assert not report.ok
