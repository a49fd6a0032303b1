"""Parse: what a body is decides whether it is parsed; HTML pages get links and a simhash."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import example, given, settings
from hypothesis import strategies as st
from url_caches import fill_url_caches, module_caches

from beamcrawl.core.content import textfp
from beamcrawl.core.content.htmlparse import checksum
from beamcrawl.core.urls import hostkeys, urlnorm
from beamcrawl.core.urls.urlnorm import fingerprint
from beamcrawl.schemas.records import FetchResult, FrontierEntry, ParsedPage
from beamcrawl.transforms.dead_letter import collected
from beamcrawl.transforms.parse import ParsePages, _ParseFn, body_kind, parse_fetch, skipped_counter_name

TEXT = " ".join(f"word{i} topic{i % 7} detail{i % 11}" for i in range(60))
PAGE = f"<html><head><title>T</title></head><body><p>{TEXT}</p><a href='/next'>next</a></body></html>".encode()
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40 + b"<a href='/x'>x</a>"


def _result(
    body: bytes,
    ctype: str | None = "text/html; charset=utf-8",
    status: int = 200,
    source: str = "link",
    headers: list[tuple[str, str]] = (),
) -> FetchResult:
    url = "http://a.test/page"
    entry = FrontierEntry(url=url, fp=fingerprint(url), host="a.test", due_ms=0, source=source)
    headers = ([("Content-Type", ctype)] if ctype is not None else []) + list(headers)
    return FetchResult(
        entry=entry,
        outcome="fetched",
        url=url,
        final_url=url,
        status=status,
        response_headers=headers,
        body=body,
        raw_body=body,
    )


def test_html_gets_links_and_the_simhash_of_its_text():
    page = parse_fetch(_result(PAGE), "beamcrawl")
    assert page.body_kind == "html"
    assert [link.url for link in page.links] == ["http://a.test/next"]
    assert page.checksum == checksum(PAGE)
    assert page.simhash == textfp.simhash_hex(textfp.html_simhash(PAGE))
    assert page.simhash is not None and len(page.simhash) == 16


def test_too_little_text_has_no_simhash():
    page = parse_fetch(_result(b"<html><body><p>Loading</p><a href='/a'>a</a></body></html>"), "beamcrawl")
    assert page.links and page.simhash is None


def test_the_bytes_decide_when_the_label_lies_or_is_missing():
    png = parse_fetch(_result(PNG), "beamcrawl")  # a PNG labelled text/html
    assert png.body_kind == "binary:image" and png.links == [] and png.simhash is None
    assert png.checksum == checksum(PNG)  # still checksummed: the exact-copy key
    unlabelled = parse_fetch(_result(PAGE, ctype=None), "beamcrawl")
    assert unlabelled.body_kind == "html" and unlabelled.links
    xhtml = parse_fetch(_result(PAGE, ctype="application/xhtml+xml"), "beamcrawl")
    assert xhtml.body_kind == "xhtml" and xhtml.links
    text = parse_fetch(_result(PAGE, ctype="text/plain"), "beamcrawl")  # never upgraded to HTML
    assert text.body_kind == "text" and text.links == []


def test_only_2xx_bodies_are_looked_at():
    for status, source in ((404, "link"), (200, "robots")):
        page = parse_fetch(_result(PAGE, status=status, source=source), "beamcrawl")
        assert page.body_kind is None and page.links == [] and page.simhash is None


def test_skipped_bodies_are_counted_by_kind():
    assert body_kind(_result(b"%PDF-1.7", "application/pdf")) == "binary:pdf"
    assert skipped_counter_name("binary:pdf") == "skipped_binary_pdf"
    results = [
        _result(PAGE),
        _result(PNG),
        _result(b"%PDF-1.7 x", "application/pdf"),
        _result(b"%PDF-1.7 y", "application/pdf"),
        _result(b"<urlset/>", "application/xml"),
    ]
    p = TestPipeline(runner="FnApiRunner")
    _ = p | beam.Create(results) | ParsePages("beamcrawl")
    assert_that(collected(p), equal_to([]), label="No dead letters")
    result = p.run()
    result.wait_until_finish()
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace("parse"))["counters"]
    }
    assert counters["skipped_binary_pdf"] == 2
    assert counters["skipped_binary_image"] == 1 and counters["skipped_xml"] == 1
    assert "skipped_html" not in counters and counters["received"] == 5


def test_one_parse_serves_links_and_simhash_as_two_separate_parses_would():
    # parse_fetch builds one tree: links are read from it, then the text (which detaches the
    # page chrome, where links live too). Both must be what separate parses give.
    from beamcrawl.core.content.htmlparse import parse_html
    from beamcrawl.simweb import SimWeb

    chrome = (
        f"<html><body><nav><a href='/nav1'>n</a></nav><header><a href='/h'>h</a></header>"
        f"<main><p>{TEXT}</p><a href='/in'>in</a></main><footer><a href='/f'>f</a></footer></body></html>"
    ).encode()
    bodies = [chrome]
    web = SimWeb(12, seed=4, pages_per_host=10)
    bodies += [web.page_body(hi, j) for hi in range(12) for j in range(10) if web.page_kind(hi, j) != "pdf"]
    checked = 0
    for body in bodies:
        if not body.lstrip().startswith(b"<"):
            continue
        page = parse_fetch(_result(body), "beamcrawl")
        alone = parse_html(body, "http://a.test/page", "text/html; charset=utf-8")
        assert [(link.url, link.kind, link.anchor) for link in page.links] == [
            (u, k, a) for u, _, a, _, k in alone.links
        ]
        assert page.simhash == textfp.simhash_hex(textfp.html_simhash(body, "text/html; charset=utf-8"))
        checked += page.simhash is not None
    assert checked > 50
    first = parse_fetch(_result(chrome), "beamcrawl")
    assert {link.url for link in first.links} >= {"http://a.test/nav1", "http://a.test/h", "http://a.test/f"}


def test_a_page_past_the_parse_limits_is_parsed_up_to_the_cut_and_counted():
    # <p><font id=N>x x 4,000 built ~3.4 GB before the limits (#24 item 4): now the links before
    # the cut are kept, the page goes on whole (checksum of every byte), and the limit is named.
    bomb = b'<a href="/before">before</a>' + b"".join(b"<p><font id=%d>x" % i for i in range(4000))
    page = parse_fetch(_result(bomb + b'<a href="/after">after</a>'), "beamcrawl")
    assert page.parse_truncated == "depth"
    assert page.parse_error is None
    assert [link.url for link in page.links] == ["http://a.test/before"]
    assert page.checksum == checksum(bomb + b'<a href="/after">after</a>')

    p = TestPipeline(runner="FnApiRunner")
    _ = p | beam.Create([_result(bomb), _result(PAGE)]) | ParsePages("beamcrawl")
    assert_that(collected(p), equal_to([]), label="No dead letters")
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace("parse"))["counters"]
    by_name = {c.key.metric.name: c.committed for c in counters}
    assert by_name.get("truncated_depth") == 1


def test_a_parse_cut_is_a_column_of_the_page_event():
    """The page event (pages Parquet) says which limit cut the parse, and is null for a whole parse."""
    from beamcrawl.transforms.warc_io import page_event

    deep = "<html><body>" + "<div>" * 5000 + "x"
    for body, expected in ((deep, "depth"), ("<html><body><a href=/a>a</a>", None)):
        page = parse_fetch(_result(body.encode()), "beamcrawl")
        assert page_event(page, None)["parse_truncated"] == expected


def test_a_parse_bundle_leaves_the_url_caches_empty():
    # The caches' entries, made all through a long bundle, pin the memory its pages used
    # (bench/README.md, "The URL caches pin the fetch stage's memory"): gone when it ends.
    fn = _ParseFn("beamcrawl", 1 << 20)
    fn.setup()
    fill_url_caches()
    pages = [p for p in fn.process(_result(PAGE)) if isinstance(p, ParsedPage)]
    assert [link.url for link in pages[0].links] == ["http://a.test/next"]
    caches = module_caches(urlnorm) + module_caches(hostkeys)
    assert sum(c.cache_info().currsize for c in caches) > 0
    fn.finish_bundle()
    assert [c.__name__ for c in caches if c.cache_info().currsize] == []


# A Location's path as a server writes it: any text, sent as its UTF-8 bytes (RFC 9110 wants
# ASCII, many servers send a page's name as it is), which the fetcher holds read as latin-1.
_PATHS = st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="#?\\"), max_size=12)


@settings(max_examples=300, deadline=None)
@given(path=_PATHS)
@example(path="café")
@example(path="€/日本")
def test_a_location_sent_as_utf8_is_followed_to_the_url_it_names(path):
    """The redirect link is the URL the Location's bytes name (as browsers, and warcio's
    reading of the WARC record, read them: UTF-8). Read as latin-1, ``/caf`` C3 A9 was
    normalised to ``/caf%C3%83%C2%A9``, a URL the server never named, which the crawler
    then queued, checked against robots.txt and requested."""
    held = f"/{path}".encode("utf-8").decode("latin-1")  # as the fetcher reads a header
    page = parse_fetch(_result(b"", status=301, headers=[("Location", held)]), "beamcrawl")
    try:
        named = urlnorm.normalize(f"/{path}", "http://a.test/page")
    except urlnorm.InvalidURL:
        assert page.links == [] and page.parse_error == "bad redirect location"
        return
    assert [(link.kind, link.url) for link in page.links] == [("redirect", named)]


def test_a_location_of_bytes_that_are_no_utf8_is_read_as_before():
    """Bytes that are no UTF-8 (a latin-1 name) are read as they were: as latin-1."""
    page = parse_fetch(_result(b"", status=302, headers=[("Location", "/caf\xe9")]), "beamcrawl")
    assert [link.url for link in page.links] == ["http://a.test/caf%C3%A9"]


def test_a_page_past_the_link_cap_gives_its_first_links_and_is_marked_and_counted():
    """A page of many distinct links gives the first ``max_links`` (its checksum and simhash
    as before); it is marked ``links`` in the page event and counted as parse/truncated_links."""
    from beamcrawl.transforms.warc_io import page_event

    body = f"<html><body><p>{TEXT}</p>".encode() + b"".join(b'<a href="/p%d">%d</a>' % (i, i) for i in range(5000))
    whole = parse_fetch(_result(body), "beamcrawl", max_links=0)
    page = parse_fetch(_result(body), "beamcrawl", max_links=300)
    assert len(whole.links) == 5000 and not whole.links_capped and whole.parse_truncated is None
    assert page.links_capped and page.parse_truncated == "links"
    assert [link.url for link in page.links] == [f"http://a.test/p{i}" for i in range(300)]
    assert list(page.links) == list(whole.links)[:300]
    assert (page.checksum, page.simhash) == (whole.checksum, whole.simhash) and page.simhash is not None
    assert page_event(page, None)["parse_truncated"] == "links"
    assert page_event(page, None)["out_links"] == 300
    # Cut by a parse limit as well: the limit is the page's record; the cap is still counted.
    both = parse_fetch(_result(body + b"<div>" * 5000), "beamcrawl", max_links=300)
    assert both.parse_truncated == "depth" and both.links_capped

    p = TestPipeline(runner="FnApiRunner")
    _ = (
        p
        | beam.Create([_result(body), _result(body + b"<div>" * 5000), _result(PAGE)])
        | ParsePages("beamcrawl", max_links=300)
    )
    assert_that(collected(p), equal_to([]), label="No dead letters")
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace("parse"))["counters"]
    by_name = {c.key.metric.name: c.committed for c in counters}
    assert by_name.get("truncated_links") == 2
    assert by_name.get("truncated_depth") == 1
    assert by_name.get("links") == 300 + 300 + 1
