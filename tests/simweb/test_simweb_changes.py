"""The change model, without a server: seeded Poisson versions, versioned bodies and validators,
conditional-request decisions, sitemaps (index, gzipped and plain children, sitemap-only pages,
honest and lying lastmod), feeds, and the truth of all of it."""

from __future__ import annotations

import gzip
import math
import statistics
from collections import Counter
from html.parser import HTMLParser

import pytest

from beamcrawl.core.content import sitemaps
from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.simweb.changes import (
    CHANGE_MIX,
    CHANGE_MULTIPLIERS,
    VERSION0_AGE,
    SeededChanges,
    etag_matches,
    http_date,
    not_modified,
    parse_http_date,
    w3c_datetime,
)
from beamcrawl.simweb.site import FEED_ITEMS, SITEMAP_FILES, SITEMAP_INDEX, SimWeb
from beamcrawl.simweb.truth import build_truth, web_truth

PORT = 8123
EPOCH = 1_800_000_000.25
SCALE = 0.5


@pytest.fixture(scope="module")
def web() -> SimWeb:
    # 60 hosts: from host 40 on there are mirror, near-copy and template hosts.
    return SimWeb(60, seed=3, pages_per_host=40, port=PORT, change_scale=SCALE, epoch=EPOCH)


@pytest.fixture(scope="module")
def truth(web: SimWeb) -> dict:
    return web_truth(web)


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.alternates: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k.lower(): v or "" for k, v in attrs}
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if tag == "link" and a.get("rel") == "alternate":
            self.alternates.append((a.get("type", ""), a.get("href", "")))


def _anchors(body: bytes) -> _Anchors:
    p = _Anchors()
    p.feed(body.decode())
    return p


def _pages(web: SimWeb, hi: int) -> list[str]:
    """Every change-model page of a host (numbered pages and sitemap-only ones)."""
    paths = [web.page_path(hi, j) for j in range(web.pages_per_host)] + web.sitemap_only_paths(hi)
    return [p for p in paths if web.change_key(hi, p) is not None]


# --------------------------------------------------------------------------- the process


def test_versions_are_deterministic_for_a_seed_and_differ_across_seeds() -> None:
    a = SeededChanges(7, 1.0, 1000.0)
    b = SeededChanges(7, 1.0, 1000.0)
    keys = [(h, j) for h in range(5) for j in range(30)]
    # Ask in different orders and horizons: the lazily extended streams must agree.
    for h, j in keys:
        a.version_at(h, j, 1100.0)
    for h, j in reversed(keys):
        assert b.change_times(h, j, 1300.0)[: a.version_at(h, j, 1100.0)] == a.change_times(h, j, 1100.0)
        assert a.change_class(h, j) == b.change_class(h, j)
    c = SeededChanges(8, 1.0, 1000.0)
    assert [c.change_times(h, j, 1100.0) for h, j in keys] != [a.change_times(h, j, 1100.0) for h, j in keys]
    # The epoch only shifts the process.
    d = SeededChanges(7, 1.0, 5000.0)
    for h, j in keys[:20]:
        shifted = [t - 4000.0 for t in d.change_times(h, j, 5100.0)]
        assert shifted == pytest.approx(a.change_times(h, j, 1100.0), abs=1e-6)


def test_class_mix_matches_the_documented_shares() -> None:
    m = SeededChanges(1, 1.0, 0.0)
    counts = Counter(m.change_class(h, j) for h in range(100) for j in range(100))
    for name, share in CHANGE_MIX:
        assert abs(counts[name] / 10_000 - share) < 0.02, (name, counts)


@pytest.mark.parametrize("cls", ["fast", "medium", "slow"])
def test_empirical_mean_interval_per_class(cls: str) -> None:
    scale = 0.25
    m = SeededChanges(11, scale, 100.0)
    mean = CHANGE_MULTIPLIERS[cls] * scale  # type: ignore[operator]
    keys = [(h, j) for h in range(40) for j in range(40) if m.change_class(h, j) == cls][:60]
    assert len(keys) >= 30
    horizon = 100.0 + mean * 1500
    gaps: list[float] = []
    counts: list[int] = []
    for key in keys:
        assert m.mean_interval(*key) == pytest.approx(mean)
        times = m.change_times(*key, horizon)
        assert times == sorted(times) and times[0] > 100.0 and times[-1] <= horizon
        gaps.extend(b - a for a, b in zip([100.0] + times, times))
        counts.append(len(times))
    # ~90,000 exponential gaps: the mean is within 2%, the spread is an exponential's (sd = mean).
    assert statistics.fmean(gaps) == pytest.approx(mean, rel=0.02)
    assert statistics.pstdev(gaps) == pytest.approx(mean, rel=0.05)
    # Poisson counts: mean 1500 changes per page over the horizon, variance about the mean.
    assert statistics.fmean(counts) == pytest.approx(1500, rel=0.02)
    assert statistics.pvariance(counts) < 3 * 1500


def test_static_pages_never_change_and_version_rules() -> None:
    m = SeededChanges(2, 0.01, 500.0)
    static = [(h, j) for h in range(10) for j in range(20) if m.change_class(h, j) == "static"]
    assert static
    for key in static:
        assert m.mean_interval(*key) is None
        assert m.change_times(*key, 1e7) == []
        assert m.version_at(*key, 1e7) == 0
        assert m.last_change(*key, 1e7) == m.version0_time == math.floor(500.0) - VERSION0_AGE
    key = next((h, j) for h in range(10) for j in range(20) if m.change_class(h, j) == "fast")
    times = m.change_times(key[0], key[1], 510.0)
    assert len(times) > 100
    assert m.version_at(*key, 499.0) == 0 and m.version_at(*key, 500.0) == 0
    for v, t in enumerate(times[:50], start=1):
        # Changes count in (epoch, t]: the version steps exactly at a change time.
        assert m.version_at(*key, t) == v
        assert m.version_at(*key, math.nextafter(t, -math.inf)) == v - 1
        assert m.last_change(*key, t) == t == m.change_time(*key, v)
    # Version 0 of a changing page was modified as its own process would have it: before the
    # epoch, by about its mean interval (not a month, as a static page's).
    before = m.last_change(*key, 500.0)
    assert before == m.change_time(*key, 0) == m.version0_changed(*key) and 499.0 - 10 < before <= 499.0
    ages = [500.0 - m.version0_changed(h, j) for h in range(10) for j in range(200) if m.change_class(h, j) == "medium"]
    assert 0.5 < sum(ages) / len(ages) < 2.0  # medium: mean 8 x 0.01 s, rounded up to whole seconds


def test_invalid_parameters() -> None:
    with pytest.raises(ValueError):
        SeededChanges(1, 0.0, 0.0)
    with pytest.raises(ValueError):
        SimWeb(3, change_scale=-1.0)
    off = SimWeb(3, port=PORT)
    assert off.changes is None and off.change_class(0, 0) is None and off.change_key(0, "/") is None
    with pytest.raises(ValueError):
        off.version_at(0, 0, 1.0)


# --------------------------------------------------------------------- validators and dates


def test_dates() -> None:
    assert http_date(784111777.9) == "Sun, 06 Nov 1994 08:49:37 GMT"
    assert parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT") == 784111777.0
    assert parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT") == 784111777.0  # RFC 850
    assert parse_http_date("Sun Nov  6 08:49:37 1994") == 784111777.0  # asctime
    assert parse_http_date("yesterday") is None and parse_http_date("") is None
    assert w3c_datetime(784111777.9876) == "1994-11-06T08:49:37.987Z"
    assert sitemaps.parse_w3c_datetime(w3c_datetime(784111777.9876)) == (784111777.0, 0.0)


def test_etag_weak_comparison() -> None:
    etag = '"abc-1f-v3"'
    assert etag_matches(etag, etag)
    assert etag_matches('W/"abc-1f-v3"', etag)
    assert etag_matches('"other", W/"abc-1f-v3"', etag)
    assert etag_matches("*", etag)
    assert not etag_matches('"abc-1f-v2"', etag)
    assert not etag_matches("abc-1f-v3", etag)  # unquoted: not an entity tag
    assert not etag_matches('"abc-1f-v3', etag)


def test_conditional_precedence_and_dates() -> None:
    modified, previous = 1_000_000.7, 999_000.2
    lm = http_date(modified)
    etag = '"x-v2"'
    # If-None-Match decides alone, both ways.
    assert not_modified(etag, None, etag, modified, previous)
    assert not not_modified('"x-v1"', lm, etag, modified, previous)
    assert not_modified("*", "Thu, 01 Jan 1970 00:00:00 GMT", etag, modified, previous)
    # Without it, If-Modified-Since: the Last-Modified second or later is not modified.
    assert not_modified(None, lm, etag, modified, previous)
    assert not_modified(None, http_date(modified + 3600), etag, modified, previous)
    assert not not_modified(None, http_date(modified - 1), etag, modified, previous)
    assert not not_modified(None, "not a date", etag, modified, previous)
    assert not not_modified(None, None, etag, modified, previous)
    # Version 0 (no previous change) works the same.
    assert not_modified(None, lm, etag, modified, None)
    # Two versions in the same second: the date cannot tell them apart, so never a 304.
    assert not not_modified(None, lm, etag, modified, math.floor(modified) + 0.1)
    assert not_modified(etag, lm, etag, modified, math.floor(modified) + 0.1)


# ---------------------------------------------------------------------- pages and versions


def _versions_seen(web: SimWeb, hi: int, path: str, until: float) -> list[float]:
    return web.change_times(hi, path, until)


def test_body_and_etag_change_with_the_version_links_do_not(web: SimWeb) -> None:
    checked = 0
    for hi in range(20):
        name = web.names[hi]
        for path in _pages(web, hi):
            if web.change_class(hi, path) != "fast":
                continue
            times = web.change_times(hi, path, EPOCH + 20 * SCALE)
            if len(times) < 3:
                continue
            bodies, etags, lms = [], [], []
            for t in (EPOCH, times[0], times[1], times[2]):
                r = web.respond(name, path, now=t)
                assert r.status == 200 and r.version == web.version_at(hi, path, t)
                assert r.modified == web.last_change(hi, path, t)
                assert r.last_modified == http_date(r.modified)
                bodies.append(r.body)
                etags.append(r.etag)
                lms.append(r.modified)
            assert [web.respond(name, path, now=t).version for t in (EPOCH, times[0], times[1])] == [0, 1, 2]
            assert len(set(bodies)) == 4 and len(set(etags)) == 4
            assert lms[1:] == [times[0], times[1], times[2]]
            assert web.changes.version0_time < lms[0] < EPOCH  # type: ignore[union-attr]  # its own age, not a month
            assert b'class="update"' not in bodies[0] and b"Updated (revision 2)" in bodies[2]
            assert len({tuple(_anchors(b).hrefs) for b in bodies}) == 1
            assert web.versioned_body(hi, path, 2) == bodies[2]
            # Same version, same bytes, whenever asked.
            mid = (times[1] + times[2]) / 2
            assert web.respond(name, path, now=mid).body == bodies[2]
            checked += 1
    assert checked >= 10


def test_version_zero_pages_keep_their_classic_bytes(web: SimWeb) -> None:
    off = SimWeb(60, seed=3, pages_per_host=40, port=PORT)
    for hi in range(10):
        for j in range(1, 40):
            if web.change_key(hi, j) is None:
                continue
            path = web.page_path(hi, j)
            assert web.respond(web.names[hi], path, now=EPOCH).body == off.page_body(hi, j)


def test_copies_change_with_their_originals(web: SimWeb, truth: dict) -> None:
    times = [EPOCH + k * 3.7 * SCALE for k in range(12)]
    mirrors = near = dups = 0
    for hi in range(web.hosts):
        info = web.host(hi)
        for j in range(web.pages_per_host):
            path = web.page_path(hi, j)
            key = web.change_key(hi, path)
            if key is None:
                continue
            if info.role in ("mirror", "near"):
                orig = info.copy_of
                assert key == web.change_key(orig, path)  # type: ignore[arg-type]
                if info.role == "mirror":
                    for t in times:
                        a = web.respond(info.name, path, now=t)
                        b = web.respond(web.names[orig], path, now=t)  # type: ignore[index]
                        assert (a.body, a.etag, a.version) == (b.body, b.etag, b.version)
                    mirrors += 1
                else:
                    near += 1
            entry = truth[info.name]["pages"][path]
            dup = entry["duplicate_of"]
            if dup is not None and not dup.startswith("http"):
                # An exact duplicate on the same host stays one at every moment.
                for t in times:
                    assert web.respond(info.name, path, now=t).body == web.respond(info.name, dup, now=t).body
                dups += 1
    assert mirrors and near and dups


# ---------------------------------------------------------------------- sitemaps and feeds


def test_robots_names_sitemap_index_and_feeds_on_about_half_the_hosts(web: SimWeb) -> None:
    with_index = [hi for hi in range(web.hosts) if web.host(hi).sitemap_index]
    assert 0.35 <= len(with_index) / web.hosts <= 0.6
    liars = [hi for hi in with_index if not web.host(hi).lastmod_honest]
    assert 0.1 <= len(liars) / len(with_index) <= 0.4
    for hi in range(web.hosts):
        info = web.host(hi)
        named = RobotsRules.parse(info.robots.text.encode(), "beamcrawl", 200).sitemaps() if info.robots.text else []
        expected = ([info.origin + SITEMAP_INDEX] if info.sitemap_index else []) + [
            info.origin + {"rss": "/feed.rss", "atom": "/feed.atom"}[f] for f in info.feeds
        ]
        if info.robots.text:
            assert named == expected
            assert list(info.robots.sitemaps) == expected
        # The legacy sitemap is gone with the change model.
        assert web.respond(info.name, "/sitemap.xml", now=EPOCH).status == 404
        if info.sitemap_index:
            assert 5 <= info.sitemap_only <= 10
            assert info.robots.status == 200 or info.robots.kind == "redirect"
        else:
            assert info.sitemap_only == 0
            for path in (SITEMAP_INDEX, *SITEMAP_FILES, "/s/0.html"):
                assert web.respond(info.name, path, now=EPOCH).status == 404
    assert any(web.host(hi).robots.kind == "private_sitemap" for hi in with_index)


def _read_sitemaps(web: SimWeb, hi: int, now: float) -> tuple[list[sitemaps.Entry], list[sitemaps.Entry]]:
    """Follow the index to both children; return (index entries, page entries)."""
    info = web.host(hi)
    origins = (info.origin,)
    r = web.respond(info.name, SITEMAP_INDEX, now=now)
    assert r.status == 200 and r.content_type == "application/xml"
    index = sitemaps.parse(r.body, info.origin + SITEMAP_INDEX, robots_origins=origins)
    assert index.kind == "sitemapindex" and index.error is None
    assert [e.url for e in index.sitemaps] == [info.origin + p for p in SITEMAP_FILES]
    entries: list[sitemaps.Entry] = []
    for child in index.sitemaps:
        path = child.url[len(info.origin) :]
        c = web.respond(info.name, path, now=now)
        assert c.status == 200
        if path.endswith(".gz"):
            assert c.content_type == "application/gzip" and c.body[:2] == b"\x1f\x8b"
            assert gzip.decompress(c.body).startswith(b"<?xml")
        else:
            assert c.content_type == "application/xml" and c.body.startswith(b"<?xml")
        doc = sitemaps.parse(c.body, child.url, robots_origins=origins)
        assert doc.kind == "urlset" and doc.error is None and doc.truncated is None and doc.skipped == 0
        assert len(doc.urls) <= sitemaps.MAX_URLS and len(c.body) <= sitemaps.MAX_BYTES
        entries.extend(doc.urls)
    return index.sitemaps, entries


def test_sitemaps_parse_to_the_truth_with_true_lastmod(web: SimWeb, truth: dict) -> None:
    now = EPOCH + 123.456
    honest_seen = liar_seen = 0
    for hi in range(web.hosts):
        info = web.host(hi)
        rec = truth[info.name]
        if not info.sitemap_index:
            assert rec["sitemap_index"] is None and rec["sitemap_only"] == []
            continue
        children, entries = _read_sitemaps(web, hi, now)
        urls = [e.url for e in entries]
        assert len(urls) == len(set(urls))
        listed = [u for child in rec["sitemap_files"] for u in rec["pages"][child[len(info.origin) :]]["links"]]
        assert urls == listed
        only = {info.origin + p for p in rec["sitemap_only"]}
        assert len(only) == info.sitemap_only and only <= set(urls)
        # Sitemap-only pages are linked from no page of the web.
        linked = {
            u
            for r in truth.values()
            for e in r["pages"].values()
            for u in e.get("links", ())
            if "sitemap" not in e and "feed" not in e
        }
        assert not only & linked
        for p in rec["sitemap_only"]:
            assert rec["pages"][p]["sitemap_only"] is True and rec["pages"][p]["change_class"]
            assert web.respond(info.name, p, now=now).status == 200
        for e in entries:
            path = e.url[len(info.origin) :]
            stated = e.lastmod
            if info.lastmod_honest:
                assert stated == math.floor(web.last_change(hi, path, now)), e.url
            else:
                assert stated == math.floor(now)
        if info.lastmod_honest:
            honest_seen += 1
            changed = [e for e in entries if e.lastmod and e.lastmod > EPOCH]
            assert changed  # some pages have changed by now, and the sitemap says so
            for child in children:
                path = child.url[len(info.origin) :]
                newest = max(web.last_change(hi, p[len(info.origin) :], now) for p in rec["pages"][path]["links"])
                assert child.lastmod == math.floor(newest)
        else:
            liar_seen += 1
    assert honest_seen and liar_seen


def test_feeds_parse_to_the_most_recently_changed_pages(web: SimWeb, truth: dict) -> None:
    now = EPOCH + 77.7
    seen = Counter()
    for hi in range(web.hosts):
        info = web.host(hi)
        rec = truth[info.name]
        assert rec["feeds"] == [info.origin + {"rss": "/feed.rss", "atom": "/feed.atom"}[f] for f in info.feeds]
        root = web.respond(info.name, "/", now=now).body
        alternates = _anchors(root).alternates
        assert [href for _, href in alternates] == [{"rss": "/feed.rss", "atom": "/feed.atom"}[f] for f in info.feeds]
        for f in ("rss", "atom"):
            path = {"rss": "/feed.rss", "atom": "/feed.atom"}[f]
            r = web.respond(info.name, path, now=now)
            if f not in info.feeds:
                assert r.status == 404
                continue
            seen[f] += 1
            assert r.status == 200 and r.content_type == f"application/{f}+xml"
            doc = sitemaps.parse(r.body, info.origin + path)
            assert doc.kind == f and doc.error is None
            pool = rec["pages"][path]["links"]
            dated = sorted(((web.last_change(hi, u[len(info.origin) :], now), u) for u in pool), key=lambda x: -x[0])
            assert len(doc.urls) == min(FEED_ITEMS, len(pool))
            stamps = [e.lastmod for e in doc.urls]
            assert stamps == sorted(stamps, reverse=True)  # newest first
            for e in doc.urls:
                assert e.url in pool
                assert e.lastmod == math.floor(web.last_change(hi, e.url[len(info.origin) :], now))
            # Nothing left out changed later than the oldest item listed.
            cutoff = min(web.last_change(hi, e.url[len(info.origin) :], now) for e in doc.urls)
            assert all(t <= cutoff for t, u in dated if u not in {e.url for e in doc.urls})
            assert not {info.origin + p for p in rec["sitemap_only"]} & {e.url for e in doc.urls}
    assert seen["rss"] and seen["atom"]
    # Feed links sit in the root page of a mirror exactly as in its original's.
    for hi in range(web.hosts):
        info = web.host(hi)
        if info.role == "mirror":
            assert info.feeds == web.host(info.copy_of).feeds  # type: ignore[arg-type]


def test_truth_describes_everything_served_and_unknown_paths_stay_404(web: SimWeb, truth: dict) -> None:
    now = EPOCH + 10.0
    for hi in range(web.hosts):
        info = web.host(hi)
        rec = truth[info.name]
        assert rec["change_model"]["epoch"] == EPOCH and rec["change_model"]["change_scale"] == SCALE
        for target, entry in rec["pages"].items():
            r = web.respond(info.name, target, now=now)
            assert r.status == entry["status"], (info.name, target)
            if "content_type" in entry:
                assert r.content_type == entry["content_type"]
            if entry.get("change_class"):
                key = web.change_key(hi, target)
                assert entry["change_key"] == list(key)  # type: ignore[arg-type]
                assert entry["mean_interval"] == web.mean_interval(hi, target)
                assert r.version == web.version_at(hi, target, now)
            elif entry["status"] == 200:
                assert r.version is None
        for path in (
            "/s/10.html",
            f"/s/{info.sitemap_only}.html",
            "/sitemaps/pages-3.xml",
            "/sitemaps/pages-1.xml",
            "/feed.xml",
            "/s/01.html",
        ):
            assert web.respond(info.name, path, now=now).status == 404
    # build_truth with the same parameters is the same truth.
    assert build_truth(60, seed=3, pages_per_host=40, port=PORT, change_scale=SCALE, epoch=EPOCH) == truth


def test_a_change_mix_sets_the_class_shares_and_travels_with_the_truth():
    from beamcrawl.simweb.changes import SeededChanges, parse_mix

    mix = parse_mix("static=0.5,slow=0.05,medium=0.2,fast=0.25")
    model = SeededChanges(3, 1.0, 1_700_000_000.0, mix)
    drawn = [model.change_class(h, j) for h in range(40) for j in range(100)]
    shares = {c: drawn.count(c) / len(drawn) for c in ("static", "slow", "medium", "fast")}
    assert (
        abs(shares["static"] - 0.5) < 0.03 and abs(shares["slow"] - 0.05) < 0.02 and abs(shares["fast"] - 0.25) < 0.03
    )
    assert model.describe()["mix"] == dict(mix)
    for bad in ("static=1", "static=0.5,slow=0.5,medium=0,fast=0.1", "static=x,slow=0,medium=0,fast=1", "odd=1"):
        with pytest.raises(ValueError):
            parse_mix(bad)
