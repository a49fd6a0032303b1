"""The freshness stage and what it feeds: the revisit decided per fetch, the next frontier
row staged for the commit, a 304 archived as a server-not-modified revisit, slot assignment
ranking revisits and new URLs on one scale, and discovery from robots.txt, sitemaps and
feeds."""

from __future__ import annotations

import gzip
import io
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.archive import cdxj
from beamcrawl.core.policy import change_rate as freshness
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.core.net.conditional import REVISIT_PROFILE_NOT_MODIFIED
from beamcrawl.core.urls.urlnorm import fingerprint
from beamcrawl.schemas import cells as cellfmt
from beamcrawl.schemas.records import REVISIT_CELL, FetchResult, FrontierEntry, Link, ParsedPage, UrlState
from beamcrawl.transforms.assign_slots import plan_host, ranking
from beamcrawl.transforms.freshness import UNIFORM_PRIORITY, next_entry, schedule_page
from beamcrawl.transforms.parse import parse_fetch
from beamcrawl.state.frontier import read_requeue_line
from beamcrawl.transforms.record import requeue_line, url_state_cells
from beamcrawl.transforms.url_seen import page_candidates
from beamcrawl.transforms.warc_io import archive_fetch, capture_kind, page_event

URL = "http://a.test/story.html"
T0 = 1_800_000_000.0
POLICY = CrawlConfig(
    out="/tmp/o", store="sqlite:///tmp/o", min_revisit_interval=10, max_revisit_interval=1000, prior_change_interval=100
).schedule_policy()


def _entry(url: str = URL, **kw) -> FrontierEntry:
    return FrontierEntry(url=url, fp=fingerprint(url), host=url.split("/")[2], due_ms=0, **kw)


def _page(
    status: int = 200,
    body: bytes = b"<html><body>v1</body></html>",
    at: float = T0,
    entry=None,
    headers=(),
    request=(),
    links=(),
):
    entry = entry or _entry()
    fetch = FetchResult(
        entry=entry, outcome="fetched", url=entry.url, status=status, fetched_at=at, reason="OK",
        response_headers=[("Content-Type", "text/html"), *headers], request_headers=[("User-Agent", "t"), *request],
        body=body, raw_body=body,
    )  # fmt: skip
    page = ParsedPage(fetch=fetch, checksum=None if status == 304 else format(hash(body) & (2**64 - 1), "016x"))
    page.links = list(links)
    return page


def _revisit(
    page: ParsedPage, at: float, status: int = 200, body: bytes = b"<html><body>v1</body></html>", **kw
) -> ParsedPage:
    """The page's next fetch, from the frontier row its last one queued."""
    row = next_entry(page)
    assert row is not None and row.source == "revisit" and row.revisit is not None
    return _page(status=status, body=body, at=at, entry=row, **kw)


def test_first_fetch_then_unchanged_then_changed_moves_the_estimate_and_the_due_time():
    first = schedule_page(_page(headers=[("ETag", '"v1"')]), POLICY)
    assert first.schedule["observed"] == "first" and first.revisit["visits"] == 1 and first.revisit["etag"] == '"v1"'
    row = next_entry(first)
    assert row.due_ms >= (T0 + 10) * 1000 and row.kind == "page" and row.reason == "revisit: first"

    same = schedule_page(_revisit(first, T0 + 20), POLICY)
    assert same.schedule["observed"] == "unchanged" and same.revisit["changes"] == 0
    changed = schedule_page(_revisit(same, T0 + 40, body=b"<html><body>v2</body></html>"), POLICY)
    assert changed.schedule["observed"] == "changed" and changed.revisit["changes"] == 1
    # A change seen after 20 s pulls the rate up: it is due sooner than after an unchanged visit.
    assert changed.revisit["lam"] > same.revisit["lam"]
    assert changed.schedule["due"] - (T0 + 40) < same.schedule["due"] - (T0 + 20)


def test_schedule_encodes_the_revisit_state_once_for_both_rows():
    """``page.revisit_cell`` is the state set beside it, as its binary cell; the next
    visit's staged row and the URL state row are what they were when each encoded it."""
    first = schedule_page(_page(headers=[("ETag", '"v1"')]), POLICY)
    same = schedule_page(_revisit(first, T0 + 20), POLICY)
    for page in (first, same):
        assert page.revisit_cell is not None and page.revisit_cell == cellfmt.encode_revisit(page.revisit)
        line = requeue_line(page)
        cells = url_state_cells(page)
        page.revisit_cell = None  # as a page scheduled before the cell was kept
        assert line == requeue_line(page) and cells == url_state_cells(page)


def test_a_304_keeps_the_copy_and_is_archived_as_a_server_not_modified_revisit():
    first = schedule_page(_page(headers=[("ETag", '"v1"')]), POLICY)
    again = _revisit(
        first, T0 + 30, status=304, body=b"", headers=[("ETag", '"v1"')], request=[("If-None-Match", '"v1"')]
    )
    again = schedule_page(again, POLICY)
    assert again.schedule["observed"] == "unchanged" and again.revisit["checksum"] == first.revisit["checksum"]
    cells = url_state_cells(again)
    assert UrlState.from_cells(cells).checksum == first.revisit["checksum"]  # the copy held, not an empty body's
    assert UrlState.from_cells(cells).revisit["visits"] == 2

    assert capture_kind(again) == "not_modified"
    archived = archive_fetch(again)
    records = list(ArchiveIterator(io.BytesIO(archived.data)))
    revisit = records[0]
    assert revisit.rec_type == "revisit"
    assert revisit.rec_headers.get_header("WARC-Profile") == REVISIT_PROFILE_NOT_MODIFIED
    assert revisit.rec_headers.get_header("WARC-Refers-To-Target-URI") == URL
    assert revisit.rec_headers.get_header("WARC-Refers-To-Date").startswith("2027-01-15T08:00:00")  # first fetch's date
    assert revisit.http_headers.get_statuscode() == "304"
    assert records[1].rec_type == "request" and records[1].http_headers.get_header("If-None-Match") == '"v1"'
    line = cdxj.entry_for_capture(archived.capture, 0, archived.response_length, "warc/round=1/x.warc.gz")
    assert line is not None and '"status": "304"' in line.line() and "digest" not in line.line()
    assert page_event(again, "x@0")["changed"] is False
    # A 304 nobody asked for is a server fault, archived as it came, and retried.
    odd = schedule_page(_revisit(first, T0 + 30, status=304, body=b""), POLICY)
    assert capture_kind(odd) == "response" and odd.schedule["action"] == "retry"


def test_status_codes_steer_the_schedule():
    gone = schedule_page(_page(status=404, body=b"nope"), POLICY)
    assert gone.schedule["observed"] == "gone" and next_entry(gone) is not None
    dead = schedule_page(_page(status=410, body=b"", entry=next_entry(gone)), POLICY)
    assert dead.schedule["action"] == "drop" and next_entry(dead) is None  # 1 + 2 misses

    target = "http://a.test/new.html"
    moved = _page(status=301, body=b"", headers=[("Location", target)])
    moved.links = [Link(url=target, fp=fingerprint(target), kind="redirect")]
    moved = schedule_page(moved, POLICY)
    assert moved.schedule["action"] == "moved" and moved.revisit["moved_to"] == target
    assert next_entry(moved).due_ms == (T0 + 1000) * 1000  # the old name is re-checked rarely

    busy = schedule_page(_page(status=503, body=b"", headers=[("Retry-After", "120")]), POLICY)
    assert busy.schedule["action"] == "retry" and busy.schedule["due"] == T0 + 120


def test_the_uniform_baseline_revisits_everything_after_the_shortest_interval_at_one_priority():
    pages = [schedule_page(_page(body=b), POLICY, uniform=True) for b in (b"a", b"b")]
    assert {p.schedule["due"] for p in pages} == {T0 + 10}
    assert {p.schedule["priority"] for p in pages} == {UNIFORM_PRIORITY}
    dead = schedule_page(_page(status=410, body=b""), POLICY, uniform=True)
    dead = schedule_page(_page(status=410, body=b"", entry=next_entry(dead)), POLICY, uniform=True)
    assert next_entry(dead) is None  # gone is gone under either policy


def test_robots_and_unfetched_results_are_not_scheduled():
    robots = schedule_page(_page(entry=_entry("http://a.test/robots.txt", source="robots")), POLICY)
    assert robots.schedule is None and next_entry(robots) is None
    deferred = _page()
    deferred.fetch.outcome = "deferred"
    assert schedule_page(deferred, POLICY).schedule is None


def test_the_staged_row_reads_back_as_the_same_frontier_entry():
    page = schedule_page(_page(headers=[("ETag", '"v1"')]), POLICY)
    key, cells = read_requeue_line(requeue_line(page))
    entry = FrontierEntry.from_cells(cells)
    assert key == entry.key and entry.revisit == page.revisit and entry.source == "revisit"


def test_revisits_rank_by_what_a_fetch_buys_against_new_urls():
    cfg = CrawlConfig(
        out="/tmp/o", store="sqlite:///tmp/o", min_revisit_interval=10, max_revisit_interval=1000, revisit_horizon=100
    )
    policy = cfg.schedule_policy()

    def revisit(url: str, lam: float, checked: float) -> FrontierEntry:
        state = freshness.RevisitState(importance=0.5, lam=lam, checked_at=checked, visits=3)
        return _entry(url, source="revisit", priority=0.01, revisit=state.to_dict())

    now = T0 + 100
    static = revisit("http://a.test/static", 1e-7, T0)
    moving = revisit("http://a.test/moving", 1 / 50, T0)
    new = _entry("http://a.test/new", priority=0.1)
    ranks = ranking([static, moving, new], cfg, now)
    assert ranks[moving.fp] > ranks[new.fp] > ranks[static.fp]
    assert ranks[moving.fp] == freshness.priority_now(freshness.RevisitState.from_dict(moving.revisit), now, policy)
    uniform = ranking([static, moving, new], CrawlConfig(out="/tmp/o", store="x", revisit_policy="uniform"), now)
    assert uniform[static.fp] == uniform[moving.fp] == 0.01  # the row's own priority

    from beamcrawl.schemas.records import HostRecord

    record = HostRecord(host="a.test", robots={"kind": "allow_all"}, robots_fetched_at=now)
    plan = plan_host("a.test", [static, new, moving], record, None, cfg, now)
    assert [e.url for e in plan.entries][:2] == [moving.url, new.url]


def test_dedupe_keeps_the_revisit_state_when_a_known_url_is_submitted_again():
    from beamcrawl.transforms.assign_slots import dedupe_entries

    scheduled = _entry(source="revisit", priority=0.1, revisit={"etag": '"v1"', "visits": 2})
    scheduled.due_ms = 5
    submitted = _entry(source="submit", priority=2.0)
    (kept,) = dedupe_entries([submitted, scheduled])
    assert kept.revisit == {"etag": '"v1"', "visits": 2} and kept.priority == 2.0


# --- discovery: robots.txt Sitemap: lines, sitemap indexes, sitemaps, feeds -------------


def _fetched(url: str, body: bytes, ctype: str, **entry) -> FetchResult:
    e = _entry(url, **entry)
    return FetchResult(
        entry=e,
        outcome="fetched",
        url=url,
        status=200,
        fetched_at=T0,
        response_headers=[("Content-Type", ctype)],
        body=body,
        raw_body=body,
    )


def test_robots_sitemap_lines_become_depth_zero_sitemaps_of_that_origin():
    robots = b"User-agent: *\nDisallow: /x\nSitemap: /sitemap_index.xml\nSitemap: http://cdn.test/a.xml.gz\n"
    page = parse_fetch(_fetched("http://a.test/robots.txt", robots, "text/plain", source="robots"), "beamcrawl")
    assert [(link.url, link.kind) for link in page.links] == [
        ("http://a.test/sitemap_index.xml", "sitemap"), ("http://cdn.test/a.xml.gz", "sitemap"),
    ]  # fmt: skip
    from beamcrawl.core.urls.urlshape import ShapeRules

    cands = page_candidates(page, ShapeRules())  # a gzipped sitemap is no "binary file" to skip
    assert {(c.kind, c.source, c.depth, c.robots_origin) for c in cands} == {("sitemap", "sitemap", 0, "http://a.test")}
    assert len(cands) == 2


def test_an_index_a_gzipped_sitemap_and_a_feed_give_their_urls_with_lastmod():
    index = (
        b'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sitemap><loc>http://a.test/s1.xml.gz</loc><lastmod>2026-01-02</lastmod></sitemap></sitemapindex>"
    )
    page = parse_fetch(
        _fetched("http://a.test/sitemap_index.xml", index, "application/xml", kind="sitemap"), "beamcrawl"
    )
    assert [(link.url, link.kind) for link in page.links] == [("http://a.test/s1.xml.gz", "sitemap")]
    child = page_candidates(page)[0]
    assert (child.kind, child.depth) == ("sitemap", 1)

    urlset = gzip.compress(
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc>http://a.test/only/1.html</loc><lastmod>2026-03-04T05:06:07Z</lastmod></url>"
        b"<url><loc>http://elsewhere.test/x.html</loc></url></urlset>"
    )
    sm = parse_fetch(
        _fetched("http://a.test/s1.xml.gz", urlset, "application/gzip", kind="sitemap", depth=1), "beamcrawl"
    )
    assert [(link.url, link.kind) for link in sm.links] == [
        ("http://a.test/only/1.html", "listed")
    ]  # out of scope dropped
    (listed,) = page_candidates(sm)
    assert (listed.source, listed.depth, listed.kind) == ("sitemap", 0, "page") and listed.lastmod == 1772600767.0
    assert listed.priority == freshness.importance(0, "sitemap", 0)

    feed = b'<rss version="2.0"><channel><item><link>http://a.test/news/9.html</link><pubDate>Tue, 03 Mar 2026 10:00:00 GMT</pubDate></item></channel></rss>'
    fd = parse_fetch(
        _fetched("http://a.test/feed.rss", feed, "application/rss+xml", kind="sitemap", source="feed"), "beamcrawl"
    )
    (item,) = page_candidates(fd)
    assert (item.url, item.source) == ("http://a.test/news/9.html", "feed")


def test_an_html_page_offers_its_feed_and_counts_linking_hosts():
    html = (
        b'<html><head><link rel="alternate" type="application/rss+xml" href="/feed.rss"></head>'
        b'<body><a href="http://b.test/x">x</a><a href="/y">y</a></body></html>'
    )
    page = parse_fetch(_fetched("http://a.test/", html, "text/html"), "beamcrawl")
    cands = {c.url: c for c in page_candidates(page)}
    assert cands["http://a.test/feed.rss"].kind == "sitemap" and cands["http://a.test/feed.rss"].source == "feed"
    assert len(cands["http://b.test/x"].inlink_hosts) == 1 and cands["http://a.test/y"].inlink_hosts == ()
    merged = cands["http://b.test/x"].merge(cands["http://b.test/x"])
    assert len(merged.inlink_hosts) == 1  # one host linking twice is one vote


@settings(max_examples=100, deadline=None)
@given(hold_s=st.floats(-100, 100_000, allow_nan=False))
def test_a_sitemap_lastmod_does_not_move_a_visit_a_redirects_retry_after_holds_before_the_hold(hold_s):
    """A URL a redirect's Retry-After holds (``u:hold``) gets its hint due when the hold ends,
    in the held visit's place; none when the hold ends after the scheduled visit, and the
    hint as ever when the hold is over."""
    from beamcrawl.schemas.records import Candidate, frontier_key
    from beamcrawl.state.frontier import HOLD_CELL
    from beamcrawl.transforms.url_seen import lastmod_hint

    page = schedule_page(_page(headers=[("ETag", '"v1"')]), POLICY)
    now_ms = int((T0 + 30) * 1000)
    hold_ms = now_ms + int(hold_s * 1000)
    cells = {**url_state_cells(page), HOLD_CELL: str(max(hold_ms, 0)).encode()}
    offer = Candidate(fp=page.fetch.entry.fp, url=URL, host="a.test", depth=0, priority=0.8, lastmod=T0 + 10)
    hint = lastmod_hint(offer, cells, now_ms)
    scheduled_ms = int(page.revisit["next_due"] * 1000)
    if hold_ms <= now_ms:
        assert hint is not None and hint.due_ms == now_ms
    elif hold_ms >= scheduled_ms:
        assert hint is None
    else:
        assert hint is not None and hint.due_ms == hold_ms and hint.key == frontier_key(hold_ms, offer.fp)
        assert hint.also_keys == [frontier_key(scheduled_ms, offer.fp).hex()]


def test_redirect_chains_stop_after_max_hops():
    target = "http://a.test/next"
    page = _page(status=301, body=b"", entry=_entry(hops=5))
    page.links = [Link(url=target, fp=fingerprint(target), kind="redirect")]
    rejected: dict[str, int] = {}
    assert page_candidates(page, rejected=rejected, max_redirects=5) == [] and rejected == {"redirect_hops": 1}
    page.fetch.entry.hops = 2
    (cand,) = page_candidates(page, max_redirects=5)
    assert (cand.hops, cand.source) == (3, "redirect")


def test_a_sitemap_lastmod_after_our_visit_moves_the_visit_forward_weighed_by_trust():
    from beamcrawl.schemas.records import Candidate, frontier_key
    from beamcrawl.transforms.url_seen import lastmod_hint

    page = schedule_page(_page(headers=[("ETag", '"v1"')]), POLICY)
    cells = url_state_cells(page)
    now_ms = int((T0 + 30) * 1000)
    assert page.revisit["next_due"] > T0 + 30  # not due yet: a hint is worth something

    def offer(lastmod):
        return Candidate(
            fp=page.fetch.entry.fp, url=URL, host="a.test", depth=0, priority=0.8, source="sitemap", lastmod=lastmod
        )

    hint = lastmod_hint(offer(T0 + 10), cells, now_ms)
    assert hint is not None and hint.due_ms == now_ms and hint.reason == "sitemap lastmod"
    # The revisit state is a binary cell; a row written before holds its JSON: the same hint.
    assert cells[REVISIT_CELL][0] == cellfmt.REVISIT
    assert lastmod_hint(offer(T0 + 10), {REVISIT_CELL: json.dumps(page.revisit).encode()}, now_ms) == hint
    for bad in (cells[REVISIT_CELL][:-1], b"[1, 2]", b"{", b"\x07"):
        assert lastmod_hint(offer(T0 + 10), {REVISIT_CELL: bad}, now_ms) is None
    assert hint.also_keys == [frontier_key(int(page.revisit["next_due"] * 1000), hint.fp).hex()]  # replaces, not adds
    assert lastmod_hint(offer(T0 - 10), cells, now_ms) is None  # dated before our visit: no news
    assert lastmod_hint(offer(None), cells, now_ms) is None

    # Visits check the claim: a lastmod that keeps claiming changes that are not there
    # loses trust, so its next hint is worth less.
    liar = schedule_page(_page(entry=hint, at=T0 + 31), POLICY)  # same body: unchanged
    assert (liar.revisit["lastmod_agree"], liar.revisit["lastmod_disagree"]) == (0.0, 1.0)
    again = lastmod_hint(offer(T0 + 40), url_state_cells(liar), int((T0 + 60) * 1000))
    assert again is not None and again.priority < hint.priority
