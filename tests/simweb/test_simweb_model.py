"""Tests of the simweb model and its truth, without a server."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit, urlunsplit

import protego
import pytest

from beamcrawl.simweb import SimWeb, build_truth, host_names, registered_domain
from beamcrawl.simweb.audit import ReferenceRobotsRules, host_policy
from beamcrawl.simweb.robots_variants import ROBOTS_CYCLE
from beamcrawl.simweb.site import PAGE_CYCLE, _relative
from beamcrawl.simweb.truth import host_truth

PORT = 8123


class _Anchors(HTMLParser):
    """Collects <base href> and <a href>/rel the way a crawler's parser would."""

    def __init__(self) -> None:
        super().__init__()
        self.base: str | None = None
        self.anchors: list[tuple[str, bool]] = []
        self.canonical: str | None = None
        self.meta_robots: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "base" and self.base is None:
            self.base = a.get("href")
        elif tag == "a" and "href" in a:
            self.anchors.append((a["href"], "nofollow" in a.get("rel", "").split()))
        elif tag == "link" and a.get("rel") == "canonical":
            self.canonical = a.get("href")
        elif tag == "meta" and a.get("name") == "robots":
            self.meta_robots = a.get("content")


def _norm(url: str) -> str:
    p = urlsplit(url)
    return urlunsplit((p.scheme, p.netloc.lower(), p.path, p.query, ""))


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb(60, seed=3, pages_per_host=40, port=PORT)


def test_host_names_deterministic_unique_and_prefix_stable() -> None:
    names = host_names(300, seed=5)
    assert names == host_names(300, seed=5)
    assert len(set(names)) == 300
    assert host_names(40, seed=5) == names[:40]
    assert host_names(300, seed=6) != names
    assert "site0001." in names[0] and "site0002." in names[1]
    suffixes = {registered_domain(n).split(".", 1)[1] for n in names}
    assert {"com", "co.uk"} <= suffixes
    assert any(n.startswith("www.") for n in names)
    # Sibling hosts share a registered domain with the host before them.
    domains = [registered_domain(n) for n in names]
    assert len(set(domains)) < len(domains)
    assert all(n == n.lower() for n in names)


def test_registered_domain() -> None:
    assert registered_domain("blog.site0003.co.uk") == "site0003.co.uk"
    assert registered_domain("site0004.net") == "site0004.net"
    assert registered_domain("www.site0002.com.au") == "site0002.com.au"


def test_every_robots_kind_appears_in_twenty_consecutive_hosts(web: SimWeb) -> None:
    kinds = {web.host(i).robots.kind for i in range(20)}
    assert kinds == set(ROBOTS_CYCLE)


@pytest.mark.parametrize(
    ("target", "base_dir", "expected"),
    [
        ("/p/3.html", "/p/", "3.html"),
        ("/p/3.html?print=1", "/p/", "3.html?print=1"),
        ("/docs/api/4.html", "/p/", "../docs/api/4.html"),
        ("/", "/p/", "../"),
        ("/", "/", "./"),
        ("/p/2.html", "/docs/guide/", "../../p/2.html"),
        ("/docs/guide/5.html", "/docs/", "guide/5.html"),
    ],
)
def test_relative(target: str, base_dir: str, expected: str) -> None:
    assert _relative(target, base_dir) == expected
    assert urljoin(f"http://h{base_dir}x.html", expected) == f"http://h{target}"


def test_page_paths_round_trip(web: SimWeb) -> None:
    for hi in range(10):
        for j in range(web.pages_per_host):
            assert web.page_index(hi, web.page_path(hi, j)) == j
    assert web.page_index(0, "/p/40.html") is None  # beyond K
    assert web.page_index(0, "/p/007.html") is None
    kinds = {web.page_kind(0, j) for j in range(1, 40)}
    assert kinds == set(PAGE_CYCLE)


def test_page_bytes_deterministic_and_seed_dependent(web: SimWeb) -> None:
    other = SimWeb(60, seed=3, pages_per_host=40, port=PORT, cache_size=1)
    for j in (0, 1, 5, 17):
        assert web.page_body(4, j) == other.page_body(4, j)
    reseeded = SimWeb(60, seed=4, pages_per_host=40, port=PORT)
    assert web.page_body(4, 3) != reseeded.page_body(4, 3)
    size = len(web.page_body(4, 3))
    assert 1500 < size < 12000


def test_truth_links_match_what_a_parser_extracts(web: SimWeb) -> None:
    """The truth's links are exactly what the served HTML yields (base href, fragments, case)."""
    checked = 0
    forms = {"relative": 0, "absolute": 0, "fragment": 0, "upper": 0, "base": 0}
    for hi in range(30):
        rec = host_truth(web, hi)
        host = rec["host"]
        for path, entry in rec["pages"].items():
            if entry["status"] != 200 or entry.get("content_type", "text/html").startswith("app"):
                continue
            if entry.get("changing"):
                continue
            parser = _Anchors()
            parser.feed(web.respond(host, path).body.decode())
            page_url = f"http://{host}:{PORT}{path}"
            base = urljoin(page_url, parser.base) if parser.base else page_url
            got = sorted({_norm(urljoin(base, h)) for h, _ in parser.anchors})
            assert got == entry["links"], (host, path)
            if "nofollow_links" in entry:
                nofollow = sorted({_norm(urljoin(base, h)) for h, nf in parser.anchors if nf})
                assert nofollow == entry["nofollow_links"], (host, path)
                assert (parser.canonical or None) == entry["canonical"]
                meta_nofollow = "nofollow" in (parser.meta_robots or "")
                assert meta_nofollow <= entry["nofollow_page"]
            forms["base"] += parser.base is not None
            for href, _ in parser.anchors:
                forms["relative"] += not href.startswith(("/", "http"))
                forms["absolute"] += href.startswith("http")
                forms["fragment"] += "#" in href
                netloc = href.split("/")[2] if href.startswith("http") else ""
                forms["upper"] += netloc != netloc.lower()
            checked += 1
    assert checked > 700
    assert all(count > 10 for count in forms.values()), forms


def test_links_cover_the_interesting_cases(web: SimWeb) -> None:
    truth = build_truth(60, seed=3, pages_per_host=40, port=PORT)
    statuses: dict[int, int] = {}
    disallowed_linked = 0
    cross_host = 0
    for rec in truth.values():
        for entry in rec["pages"].values():
            statuses[entry["status"]] = statuses.get(entry["status"], 0) + 1
            disallowed_linked += not entry["allowed"]
            cross_host += sum(not u.startswith(rec["origin"] + "/") for u in entry.get("links", ()))
    assert {200, 301, 404, 500} <= set(statuses)
    assert disallowed_linked > 100  # robots violations would show up
    assert cross_host > 500
    pages = [e for rec in truth.values() for e in rec["pages"].values() if e["status"] == 200]
    assert any(e.get("nofollow_page") for e in pages)
    assert any(e.get("canonical") for e in pages)
    assert any(e.get("duplicate_of") for e in pages)
    assert any(e.get("near_duplicate_of") for e in pages)
    assert any(e.get("trap") for e in pages)
    assert any(e.get("changing") for e in pages)


def test_duplicates(web: SimWeb) -> None:
    for hi in range(10):
        for j in range(2, 40):
            kind = web.page_kind(hi, j)
            if kind == "dup":
                assert web.page_body(hi, j) == web.page_body(hi, j - 1)
            elif kind == "near":
                a, b = web.page_body(hi, j).split(), web.page_body(hi, j - 1).split()
                assert a != b and len(a) == len(b)
                assert sum(x != y for x, y in zip(a, b)) == 1
    host = web.names[0]
    path = web.page_path(0, 3)
    assert web.respond(host, path + "?print=1").body == web.respond(host, path).body


def test_root_reaches_the_site(web: SimWeb) -> None:
    rec = host_truth(web, 0)
    root_links = rec["pages"]["/"]["links"]
    for j in range(1, 13):
        assert f"{rec['origin']}{web.page_path(0, j)}" in root_links


def test_truth_robots_agree_with_parsed_text(web: SimWeb) -> None:
    """The structured crawl delay and allowed flags agree with an independent parse of the text."""
    for hi in range(20):
        rec = host_truth(web, hi, max_pages=40)
        robots = rec["robots"]
        policy = host_policy(robots)
        if robots["status"] == 200 or robots.get("final_status") == 200:
            parsed = ReferenceRobotsRules.parse(robots["text"], "beamcrawl")
            assert parsed.crawl_delay == robots["crawl_delay_for_beamcrawl"]
        kind = robots["kind"]
        allowed = {p: e["allowed"] for p, e in rec["pages"].items()}
        privates = [p for p in allowed if p.startswith("/private/")]
        assert privates
        if kind in ("private", "private_sitemap", "wildcard", "crawl_delay", "redirect"):
            assert not any(allowed[p] for p in privates)
        if kind in ("none", "forbidden", "allow_all", "agent_group"):
            assert all(allowed[p] for p in privates)
        if kind == "unavailable":
            assert not any(allowed.values())
            assert policy.mode == "disallow_all"
        if kind == "agent_group":
            assert not any(allowed[p] for p in allowed if p.startswith(("/docs/", "/files/")))
        if kind == "wildcard":
            assert not any(allowed[p] for p in allowed if p.endswith(".pdf"))
            assert not any(allowed[p] for p in allowed if "/draft-" in p)
        if kind == "allow_override":
            assert all(allowed[p] for p in allowed if p.startswith("/docs/public/"))
            assert not allowed.get("/p/2.html", False)


def test_unknown_host_and_directory() -> None:
    web = SimWeb(3, seed=1, port=PORT)
    assert web.respond("nosuch.example", "/").status == 404
    seeds = web.respond("127.0.0.1", "/seeds.txt").body.decode().split()
    assert seeds == [f"http://{n}:{PORT}/" for n in web.names]


def test_large_page_counts_are_lazy() -> None:
    web = SimWeb(5000, seed=1, pages_per_host=100_000, port=PORT, cache_size=16)
    assert web.hosts == 5000
    j = 99_999
    path = web.page_path(4321, j)
    resp = web.respond(web.names[4321], path)
    assert resp.status == 200
    assert web.respond(web.names[4321], f"/p/{100_000}.html").status == 404
    rec = host_truth(web, 4321, max_pages=10)
    described = [p for p, e in rec["pages"].items() if "kind" in e and "?" not in p]
    assert described == [web.page_path(4321, n) for n in range(10)]


def test_truth_agrees_with_protego() -> None:
    """protego (the crawler's robots library) reads every host's file as the truth says."""
    truth = build_truth(40, seed=1, pages_per_host=40, port=PORT)
    checked = 0
    for host, rec in truth.items():
        robots = rec["robots"]
        if 200 not in (robots["status"], robots.get("final_status")):
            continue
        parsed = protego.Protego.parse(robots["text"])
        assert parsed.crawl_delay("beamcrawl") == robots["crawl_delay_for_beamcrawl"], host
        for path, entry in rec["pages"].items():
            url = f"http://{host}:{PORT}{path}"
            assert parsed.can_fetch(url, "beamcrawl") == entry["allowed"], (host, path)
            checked += 1
    assert checked > 1000


def test_robots_only_truth() -> None:
    """max_pages=0 gives the robots truth alone: all the audit needs, cheap for big webs."""
    truth = build_truth(100, seed=1, pages_per_host=100_000, port=PORT, max_pages=0)
    assert len(truth) == 100
    for rec in truth.values():
        assert "robots" in rec
        assert set(rec["pages"]) <= {"/sitemap.xml"}
