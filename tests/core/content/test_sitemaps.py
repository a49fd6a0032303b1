"""Sitemaps and feeds: safe streaming parsing, the protocol's limits, scope, dates, and the
lastmod-trust arithmetic."""

from __future__ import annotations

import calendar
import datetime
import gzip
import io
import time
import tracemalloc

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from beamcrawl.core.content import sitemaps as sm
from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.core.urls.urlnorm import InvalidURL, normalize
from beamcrawl.simweb import SimWeb

SITEMAP = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"
        xmlns:news="http://www.google.com/schemas/sitemap-news/0.9">
  <url>
    <loc>https://www.example.com/</loc>
    <lastmod>2026-04-30</lastmod>
    <changefreq>daily</changefreq>
    <priority>1.0</priority>
  </url>
  <url>
    <loc>
      https://www.example.com/catalog?item=12&amp;desc=vacation_hawaii
    </loc>
    <lastmod>2026-04-30T18:00:15+02:00</lastmod>
    <changefreq>Weekly</changefreq>
    <image:image><image:loc>https://cdn.example.com/hawaii.jpg</image:loc></image:image>
  </url>
  <url>
    <loc>https://www.example.com/news/cricket-final</loc>
    <news:news>
      <news:publication><news:name>Example News</news:name><news:language>en</news:language></news:publication>
      <news:publication_date>2026-05-01T10:42:07Z</news:publication_date>
      <news:title>Final report</news:title>
    </news:news>
  </url>
  <url><loc>https://www.example.com/bad-hints</loc><lastmod>yesterday</lastmod><changefreq>often</changefreq><priority>7</priority></url>
  <url><loc>https://www.example.com/</loc></url>
  <url><loc>https://elsewhere.example.org/spam</loc></url>
  <url><loc>mailto:someone@example.com</loc></url>
  <url><lastmod>2026-01-01</lastmod></url>
</urlset>
"""

INDEX = b"""<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>https://www.example.com/sitemap-posts.xml.gz</loc><lastmod>2026-05-01T08:00:00Z</lastmod></sitemap>
  <sitemap><loc>https://www.example.com/sitemap-pages.xml</loc></sitemap>
  <sitemap><loc>https://evil.example.net/sitemap.xml</loc></sitemap>
</sitemapindex>
"""

RSS = b"""<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom" xmlns:dc="http://purl.org/dc/elements/1.1/">
<channel>
  <title>Example News</title>
  <link>https://news.example.in/</link>
  <atom:link href="https://news.example.in/feed.xml" rel="self" type="application/rss+xml"/>
  <item>
    <title>Cricket final</title>
    <link>https://news.example.in/cricket/final-report</link>
    <guid isPermaLink="false">urn:uuid:1234</guid>
    <pubDate>Tue, 27 Oct 2026 10:42:07 +0000</pubDate>
  </item>
  <item>
    <title>Permalink guid only</title>
    <guid>https://news.example.in/2026/10/26/budget</guid>
    <pubDate>Mon, 26 Oct 2026 18:05:00 GMT</pubDate>
  </item>
  <item>
    <title>ISO date, atom link</title>
    <atom:link href="https://news.example.in/weather" rel="alternate"/>
    <dc:date>2026-10-25T06:00:00Z</dc:date>
  </item>
  <item><title>No link at all</title><guid isPermaLink="false">42</guid></item>
</channel>
</rss>
"""

ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:base="https://blog.example.com/">
  <title>Example blog</title>
  <link href="https://blog.example.com/" rel="alternate"/>
  <link href="https://blog.example.com/atom.xml" rel="self"/>
  <updated>2026-05-01T12:00:00Z</updated>
  <entry>
    <title>Relative link, resolved against xml:base</title>
    <link rel="edit" href="https://blog.example.com/api/1"/>
    <link href="posts/2026/hello.html"/>
    <id>tag:blog.example.com,2026:1</id>
    <published>2026-04-30T09:00:00Z</published>
    <updated>2026-05-01T11:00:00+01:00</updated>
    <source><link href="https://other.example/should-not-win"/></source>
  </entry>
  <entry xml:base="https://blog.example.com/archive/">
    <title>Entry base</title>
    <link rel="alternate" type="text/html" href="old.html"/>
    <id>tag:blog.example.com,2026:2</id>
    <published>2025-01-01T00:00:00Z</published>
  </entry>
  <entry>
    <title>Only an http id</title>
    <id>https://blog.example.com/posts/3</id>
    <updated>2026-05-02</updated>
  </entry>
</feed>
"""

RDF = b"""<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"
         xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="https://old.example.com/"><title>Old</title></channel>
  <item rdf:about="https://old.example.com/a"><title>A</title><link>https://old.example.com/a</link>
    <dc:date>2026-01-02T03:04:05Z</dc:date></item>
  <item rdf:about="https://old.example.com/b"><title>B</title></item>
</rdf:RDF>
"""

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE urlset [
  <!ENTITY lol "lol">
  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
  <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
  <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
  <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
  <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
  <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://www.example.com/&lol9;</loc></url>
</urlset>
"""

BASE = "https://www.example.com/sitemap.xml"


def _urls(doc: sm.Document) -> list[str]:
    return [e.url for e in doc.urls]


# --- documents ----------------------------------------------------------------------------


def test_urlset_entries_hints_scope_and_duplicates():
    doc = sm.parse(SITEMAP, BASE)
    assert doc.kind == "urlset" and doc.error is None and doc.truncated is None
    assert _urls(doc) == [
        "https://www.example.com/",
        "https://www.example.com/catalog?item=12&desc=vacation_hawaii",
        "https://www.example.com/news/cricket-final",
        "https://www.example.com/bad-hints",
    ]
    home, catalog, news, bad = doc.urls
    assert (home.lastmod, home.lastmod_span, home.changefreq, home.priority) == (1777507200.0, 86400.0, "daily", 1.0)
    assert (catalog.lastmod, catalog.lastmod_span, catalog.changefreq, catalog.priority) == (
        1777564815.0,
        0.0,
        "weekly",
        None,
    )
    assert news.lastmod == 1777632127.0  # the news sitemap's publication_date
    assert (bad.lastmod, bad.changefreq, bad.priority) == (None, None, None)  # bad hints ignored
    # Skipped: another host (out of scope), a mailto: URL, an entry without <loc>.
    assert doc.skipped == 3


def test_sitemap_index_lists_child_sitemaps_in_scope():
    doc = sm.parse(INDEX, "https://www.example.com/sitemap_index.xml")
    assert doc.kind == "sitemapindex" and doc.urls == []
    assert [e.url for e in doc.sitemaps] == [
        "https://www.example.com/sitemap-posts.xml.gz",
        "https://www.example.com/sitemap-pages.xml",
    ]
    assert doc.sitemaps[0].lastmod == 1777622400.0
    assert doc.skipped == 1


def test_rss_items_links_guids_and_dates():
    doc = sm.parse(RSS, "https://news.example.in/feed.xml")
    assert doc.kind == "rss"
    assert _urls(doc) == [
        "https://news.example.in/cricket/final-report",
        "https://news.example.in/2026/10/26/budget",
        "https://news.example.in/weather",
    ]
    assert [e.lastmod for e in doc.urls] == [1793097727.0, 1793037900.0, 1792908000.0]
    assert doc.skipped == 1  # the item without a link


_EMPTY_NAMESAKES = (
    '<atom:link rel="enclosure" href="https://news.example.in/a.mp3"/>',
    '<atom:link rel="related" href="https://news.example.in/r"></atom:link>',
    "<link/>",
    "<link> </link>",
    "<title>t</title>",
    "<pubDate/>",
)


@settings(max_examples=200, deadline=None)
@given(
    before=st.lists(st.sampled_from(_EMPTY_NAMESAKES), max_size=4),
    after=st.lists(st.sampled_from(_EMPTY_NAMESAKES), max_size=4),
)
def test_an_rss_items_link_is_read_after_empty_elements_of_its_name(before, after):
    # An item's <atom:link href=.../> (or an empty <link/>) before its <link> took the field's
    # place: the link went unread, and the item was skipped (or its guid read instead).
    item = "".join(before) + "<link>https://news.example.in/post</link>" + "".join(after)
    item += "<pubDate>Tue, 27 Oct 2026 10:42:07 GMT</pubDate>"
    feed = f'<rss xmlns:atom="http://www.w3.org/2005/Atom"><channel><item>{item}</item></channel></rss>'
    doc = sm.parse(feed.encode(), "https://news.example.in/feed.xml")
    assert [(e.url, e.lastmod) for e in doc.urls] == [("https://news.example.in/post", 1793097727.0)]


def test_atom_entries_resolve_xml_base_and_ignore_other_links():
    doc = sm.parse(ATOM, "https://blog.example.com/atom.xml")
    assert doc.kind == "atom"
    assert _urls(doc) == [
        "https://blog.example.com/posts/2026/hello.html",
        "https://blog.example.com/archive/old.html",
        "https://blog.example.com/posts/3",
    ]
    assert doc.urls[0].lastmod == 1777629600.0  # updated (11:00+01:00) wins over published
    assert doc.urls[1].lastmod == 1735689600.0
    assert doc.urls[2].lastmod_span == 86400.0


def _atom_with_base(xml_base: str, href: str) -> bytes:
    def attr(value: str) -> str:
        return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")

    return (
        f'<feed xmlns="http://www.w3.org/2005/Atom" xml:base="{attr(xml_base)}">'
        f'<entry><link href="{attr(href)}"/><updated>2026-01-01T00:00:00Z</updated></entry></feed>'
    ).encode()


@pytest.mark.parametrize(
    ("xml_base", "expected"),
    [
        # urljoin took these for paths on the feed's own host
        ("http:///a.example/", "http://a.example/x"),
        ("\\\\evil.example\\", "http://evil.example/x"),
        ("http:\\\\evil.example\\d\\", "http://evil.example/d/x"),
        # and resolved against a base with its dot segments left in
        ("http://h.example/a/..", "http://h.example/x"),
        ("//other.example/d/", "http://other.example/d/x"),
        ("HTTP:other.example/", "http://feed.example/other.example/x"),
    ],
)
def test_xml_base_is_resolved_as_a_base_href_is(xml_base, expected):
    doc = sm.parse(_atom_with_base(xml_base, "x"), "http://feed.example/f.xml")
    assert _urls(doc) == [expected]


def test_under_an_xml_base_that_is_no_url_only_absolute_links_resolve():
    for xml_base in ("mailto:x", "http://bad host/"):
        assert _urls(sm.parse(_atom_with_base(xml_base, "x"), "http://feed.example/f.xml")) == []
        doc = sm.parse(_atom_with_base(xml_base, "http://abs.example/y"), "http://feed.example/f.xml")
        assert _urls(doc) == ["http://abs.example/y"]


_BASE_PIECES = st.sampled_from(
    [
        "http:",
        "https:",
        "HTTP:",
        "//",
        "///",
        "\\\\",
        "\\",
        "/",
        "a.example",
        "b.example:8080",
        "d",
        "..",
        ".",
        "?q",
        "#f",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_BASE_PIECES, min_size=1, max_size=6).map("".join),
    st.sampled_from(["x", "../y", "/z", "?q", "//h.example/w"]),
)
def test_an_entry_link_reaches_the_host_a_browser_resolves(xml_base, href):
    """Over generated xml:base values: an Atom entry's link is the URL a browser's parser
    (ada) makes of the link against the xml:base against the feed's URL, in normal form
    (under an xml:base the crawler refuses, such as a host with an empty label, only
    absolute links resolve)."""
    ada_url = pytest.importorskip("ada_url")
    feed = "http://feed.example/dir/f.xml"
    try:
        normalize(xml_base, feed)
        expected = normalize(ada_url.URL(href, base=ada_url.URL(xml_base, base=feed).href).href)
    except (ValueError, InvalidURL):
        return
    assert _urls(sm.parse(_atom_with_base(xml_base, href), feed)) == [expected]


def test_rss_1_0():
    doc = sm.parse(RDF, "https://old.example.com/index.rdf")
    assert doc.kind == "rss"
    assert _urls(doc) == ["https://old.example.com/a", "https://old.example.com/b"]
    assert doc.urls[0].lastmod == 1767323045.0


def test_feeds_may_link_to_other_hosts():
    feed = RSS.replace(b"https://news.example.in/weather", b"https://partner.example.com/story")
    assert "https://partner.example.com/story" in _urls(sm.parse(feed, "https://news.example.in/feed.xml"))


def test_text_sitemap():
    text = (
        b"\xef\xbb\xbfhttps://www.example.com/a\r\n\r\nhttps://www.example.com/b\nnot a url\nhttps://other.example/c\n"
    )
    doc = sm.parse(text, BASE)
    assert doc.kind == "text"
    assert _urls(doc) == ["https://www.example.com/a", "https://www.example.com/b"]
    assert doc.skipped == 2


@settings(max_examples=200, deadline=None)
@given(
    paths=st.lists(st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True), min_size=1, max_size=8, unique=True),
    ends=st.lists(st.sampled_from(["\n", "\r\n", "\r", "\r\r\n", "\n\n"]), min_size=8, max_size=8),
)
def test_a_text_sitemap_line_ends_at_lf_crlf_or_cr(paths, ends):
    # Read by LF alone, a file with CR line ends was one line: its URLs joined into one
    # (URL parsing drops the CRs), https://www.example.com/ahttps://www.example.com/b,
    # which no line named, listed and fetched.
    urls = [f"https://www.example.com/{p}" for p in paths]
    text = "".join(url + end for url, end in zip(urls, ends))
    doc = sm.parse(text.encode(), BASE)
    assert doc.kind == "text" and _urls(doc) == urls and doc.skipped == 0


@settings(max_examples=6, deadline=None)
@given(
    paths=st.lists(st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True), min_size=2, max_size=6, unique=True),
    long_at=st.integers(0, 5),
    size=st.integers(sm._MAX_LINE_BYTES + 1, 8_000_000),
    filler=st.sampled_from([b"a", b"\xc3\xa4", b" ", b"\xff"]),
    end=st.sampled_from([b"\n", b"\r\n", b"\r", b""]),
)
@example(paths=["a", "b"], long_at=1, size=8_000_000, filler=b"a", end=b"\n")
def test_a_text_sitemap_line_longer_than_a_url_is_skipped_in_bounded_memory(paths, long_at, size, filler, end):
    # A text sitemap's line was read whole, then copied, decoded and stripped: one line of
    # 50 MB peaked near 375 MB. No URL is that long; the line is skipped a piece at a time.
    urls = [f"https://www.example.com/{p}" for p in paths]
    long_at = min(long_at, len(urls))
    junk = b"https://www.example.com/" + filler * ((size - 24) // len(filler) + 1)
    lines = [u.encode() for u in urls]
    lines.insert(long_at, junk)
    data = b"\n".join(lines) + end
    result, peak = _parsed_in(data)
    assert result.kind == "text" and _urls(result) == urls and result.skipped == 1
    assert peak < 1_000_000


def test_unknown_documents_are_not_read():
    assert sm.parse(b"<html><body><a href='/x'>x</a></body></html>", BASE).kind == "unknown"
    assert sm.parse(b"", BASE) == sm.Document(kind="unknown")
    assert sm.parse(b"\x00\x01binary", BASE).urls == []


def test_malformed_xml_keeps_what_came_before():
    cut = SITEMAP[: SITEMAP.index(b"<url><loc>https://www.example.com/bad-hints")] + b"<url><loc>broken"
    doc = sm.parse(cut + b"</oops>", BASE)
    assert len(doc.urls) == 3 and doc.error is not None and doc.error.startswith("malformed XML")


@pytest.mark.parametrize(
    "data, kind", [(SITEMAP, "urlset"), (INDEX, "sitemapindex"), (RSS, "rss"), (ATOM, "atom"), (RDF, "rss")]
)
def test_sniff(data, kind):
    assert sm.sniff(data) == kind
    assert sm.sniff(gzip.compress(data)) == kind


def test_sniff_other():
    assert sm.sniff(b"https://a.example/\n") == "text"
    assert sm.sniff(b"<!doctype html><html>") == "unknown"
    assert sm.sniff(BILLION_LAUGHS) == "unknown"
    assert sm.sniff(b"") == "unknown"


# --- gzip ---------------------------------------------------------------------------------


def test_gzip_detected_by_magic_bytes_whatever_the_name():
    for url in (BASE, "https://www.example.com/sitemap.xml.gz", "https://www.example.com/sm"):
        assert _urls(sm.parse(gzip.compress(SITEMAP), url)) == _urls(sm.parse(SITEMAP, BASE))
    # A .gz file sent with Content-Encoding: gzip and not decoded by the client.
    assert len(sm.parse(gzip.compress(gzip.compress(SITEMAP)), BASE).urls) == 4


def test_corrupt_gzip_is_an_error_not_a_crash():
    data = gzip.compress(SITEMAP)
    doc = sm.parse(data[: len(data) // 2], BASE)
    assert doc.error is not None
    doc = sm.parse(data[:10] + b"\x00" * 50, BASE)
    assert doc.error is not None and doc.urls == []


@given(st.data())
def test_a_gzip_cut_anywhere_keeps_what_came_before_and_says_so(data):
    """A gzipped (or twice gzipped) sitemap cut at any byte: no exception, the URLs before
    the cut, and an error unless the whole file came."""
    layers = data.draw(st.sampled_from([1, 2]))
    whole = SITEMAP
    for _ in range(layers):
        whole = gzip.compress(whole)
    cut = data.draw(st.integers(0, len(whole)))
    expected = _urls(sm.parse(SITEMAP, BASE))
    doc = sm.parse(whole[:cut], BASE)
    assert _urls(doc) == expected[: len(_urls(doc))]
    if cut == len(whole):
        assert doc.error is None and _urls(doc) == expected
    elif cut >= 2:  # fewer bytes are no gzip at all: an empty document, not a broken one
        assert doc.error is not None


def test_gzip_bomb_stops_at_the_size_limit():
    """10 MB of padding gzips to ~10 KB; the parse stops at the uncompressed limit."""
    head = SITEMAP[: SITEMAP.index(b"  <url>")]
    bomb = gzip.compress(head + b"<url><loc>https://www.example.com/x</loc></url>" + b" " * 10_000_000 + b"</urlset>")
    assert len(bomb) < 50_000
    doc = sm.parse(bomb, BASE, max_bytes=1_000_000)
    assert doc.truncated == "bytes" and _urls(doc) == ["https://www.example.com/x"] and doc.error is None


# --- hostile XML --------------------------------------------------------------------------


def test_billion_laughs_is_refused_fast():
    start = time.process_time()
    tracemalloc.start()
    doc = sm.parse(BILLION_LAUGHS, BASE)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert doc.error == "forbidden XML construct: EntitiesForbidden"
    assert doc.urls == []
    assert time.process_time() - start < 1.0 and peak < 5_000_000


def test_quadratic_blowup_is_refused():
    big = "x" * 100_000
    doc = (
        f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY a "{big}">]>'
        f"<urlset><url><loc>https://www.example.com/{'&a;' * 1000}</loc></url></urlset>"
    ).encode()
    result = sm.parse(doc, BASE)
    assert result.error is not None and result.urls == []


def test_external_entity_never_reads_a_local_file(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    doc = (
        f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file://{secret}">]>'
        "<urlset><url><loc>https://www.example.com/&xxe;</loc></url></urlset>"
    ).encode()
    result = sm.parse(doc, BASE)
    assert result.error is not None and result.urls == []
    assert all("SECRET" not in e.url for e in result.urls)


def test_external_dtd_is_never_loaded(tmp_path):
    """A DOCTYPE naming a local DTD that would define an entity: never read."""
    dtd = tmp_path / "evil.dtd"
    dtd.write_text('<!ENTITY injected "https://evil.example/">')
    doc = (
        f'<?xml version="1.0"?><!DOCTYPE urlset SYSTEM "file://{dtd}">'
        "<urlset><url><loc>&injected;</loc></url><url><loc>https://www.example.com/ok</loc></url></urlset>"
    ).encode()
    result = sm.parse(doc, BASE)
    assert all("evil" not in e.url for e in result.urls)
    assert result.error is not None  # the undefined entity is an error, not a fetch


def test_legacy_rss_doctype_is_fine():
    feed = (
        b'<?xml version="1.0"?>\n<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN" '
        b'"http://my.netscape.com/publish/formats/rss-0.91.dtd">\n'
        b'<rss version="0.91"><channel><item><link>https://old.example/a</link></item></channel></rss>'
    )
    assert _urls(sm.parse(feed, "https://old.example/rss")) == ["https://old.example/a"]


def test_huge_field_is_dropped_not_held():
    doc = b"<urlset><url><loc>https://www.example.com/" + b"a" * 100_000 + b"</loc></url></urlset>"
    result = sm.parse(doc, BASE)
    assert result.urls == [] and result.skipped == 1


# --- limits and speed ---------------------------------------------------------------------


def _big_sitemap(n: int) -> bytes:
    rows = "".join(
        f"<url><loc>https://www.example.com/p/{i}.html</loc><lastmod>2026-05-01T10:00:00Z</lastmod>"
        "<changefreq>daily</changefreq><priority>0.5</priority></url>\n"
        for i in range(n)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{rows}</urlset>\n"
    ).encode()


def test_fifty_thousand_urls_parse_fast():
    data = gzip.compress(_big_sitemap(sm.MAX_URLS))
    start = time.process_time()
    doc = sm.parse(data, BASE)
    cpu = time.process_time() - start
    assert len(doc.urls) == sm.MAX_URLS and doc.truncated is None and doc.error is None
    assert cpu < 10.0  # measured ~0.8 s CPU (~60,000 URLs/s) for this 7 MB (0.3 MB gzipped) file


def test_url_limit_truncates():
    doc = sm.parse(_big_sitemap(sm.MAX_URLS + 5), BASE)
    assert len(doc.urls) == sm.MAX_URLS and doc.truncated == "urls"
    assert len(sm.parse(_big_sitemap(20), BASE, max_urls=10).urls) == 10


class _Padding:
    """A stream of a sitemap with 60 MB of whitespace after its first URL (never in memory)."""

    def __init__(self, total: int) -> None:
        self.parts = [
            b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>https://www.example.com/a</loc></url>'
        ]
        self.left = total

    def read(self, size: int = -1) -> bytes:
        if self.parts:
            return self.parts.pop(0)
        if self.left <= 0:
            return b""
        n = min(self.left, size if size and size > 0 else 1 << 20)
        self.left -= n
        return b" " * n


def test_fifty_megabyte_limit_on_a_stream_in_bounded_memory():
    """Streaming: reading 50 MB holds a chunk and the entries, never the document."""
    tracemalloc.start()
    doc = sm.parse(_Padding(60 * 1024 * 1024), BASE)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert doc.truncated == "bytes" and _urls(doc) == ["https://www.example.com/a"]
    assert peak < 5_000_000
    doc = sm.parse(_Padding(1024), BASE)
    assert doc.truncated is None and doc.error is not None  # ended without </urlset>


def _parsed_in(data: bytes) -> tuple[sm.Document, int]:
    """``data`` parsed, and the peak of memory the parse allocated (tracemalloc)."""
    tracemalloc.start()
    try:
        result = sm.parse(data, BASE)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@settings(max_examples=6, deadline=None)
@given(
    depth=st.integers(20_000, 300_000),
    name=st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True),
    gzipped=st.booleans(),
)
@example(depth=234829, name="a000", gzipped=True)  # 8 KiB of gzip held as 7 MB at once
def test_deep_nesting_is_read_in_bounded_memory(depth, name, gzipped):
    # The parser keeps every open element: 50 MB of nested <a> (a 50 KB gzip) held over
    # 2 GB. Reading stops at a depth no sitemap or feed needs, the entries before kept.
    doc = b"<urlset><url><loc>https://www.example.com/a</loc></url>" + f"<{name}>".encode() * depth
    data = gzip.compress(doc, 1) if gzipped else doc
    result, peak = _parsed_in(data)
    assert peak < 5_000_000
    assert _urls(result) == ["https://www.example.com/a"] and result.error is not None


@pytest.mark.parametrize("layers", [1, 2])
def test_a_gzip_that_expands_a_thousandfold_is_read_in_bounded_memory(layers):
    # Each 8 KiB of gzip was decoded whole, up to 8 MB held at once (a layer), and the
    # stream's end allocated a buffer the size of the 50 MB cap; 40 MB of spaces in one or
    # two layers held 13 and 53 MB.
    doc = b"<urlset><url><loc>https://www.example.com/a</loc></url>" + b" " * 40_000_000 + b"</urlset>"
    for _ in range(layers):
        doc = gzip.compress(doc, 9)
    result, peak = _parsed_in(doc)
    assert peak < 5_000_000
    assert _urls(result) == ["https://www.example.com/a"] and result.error is None


_FEED_ENTRIES = {
    "rss": ("<rss><channel><item>{links}</item></channel></rss>", "<link href='{href}'{rel}/>"),
    "atom": ("<feed xmlns='http://www.w3.org/2005/Atom'><entry>{links}</entry></feed>", "<link href='{href}'{rel}/>"),
}


@settings(max_examples=6, deadline=None)
@given(
    kind=st.sampled_from(sorted(_FEED_ENTRIES)),
    n=st.integers(100_000, 200_000),
    rel=st.sampled_from(["", " rel='enclosure'", " rel='alternate'", " rel=' ALTERNATE '"]),
    href=st.sampled_from(["", " ", "https://www.example.com/x"]),
    gzipped=st.booleans(),
)
@example(kind="rss", n=100_000, rel="", href="", gzipped=True)  # 1.5 MB of <link href=''/> held 12 MB
def test_an_entry_of_many_link_elements_is_read_in_bounded_memory(kind, n, rel, href, gzipped):
    # Each link element of an entry was kept until the entry ended: ~120 bytes for 15 bytes
    # of <link href=''/>, so one item of them in 50 MB (a 97 KB gzip) held 340 MB. Only the
    # first alternate link that names something is read, and the last one here does.
    document, link = _FEED_ENTRIES[kind]
    links = link.format(href=href, rel=rel) * n + "<link href='https://www.example.com/last'/>"
    doc = document.format(links=links).encode()
    result, peak = _parsed_in(gzip.compress(doc, 1) if gzipped else doc)
    assert peak < 5_000_000
    named = href.strip() and "enclosure" not in rel
    assert _urls(result) == ["https://www.example.com/x" if named else "https://www.example.com/last"]
    assert result.error is None


def test_a_feed_whose_content_nests_a_few_hundred_deep_is_read():
    content = "<div>" * 300 + "x" + "</div>" * 300
    feed = (
        '<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="https://www.example.com/p"/>'
        f'<content type="xhtml">{content}</content></entry></feed>'
    )
    result = sm.parse(feed.encode(), BASE)
    assert _urls(result) == ["https://www.example.com/p"] and result.error is None


_NAMESAKE_SHAPES = {
    "elements": "<n{i}/>",
    "attributes": "<a n{i}=''/>",
    "prefixes": "<x{i}:a xmlns:x{i}='urn:u'/>",
    "namespaces": "<a xmlns='urn:u{i}'/>",
}


@settings(max_examples=6, deadline=None)
@given(shape=st.sampled_from(sorted(_NAMESAKE_SHAPES)), n=st.integers(80_000, 150_000))
def test_many_distinct_names_are_read_in_bounded_memory(shape, n):
    # The parser keeps every distinct name it meets (expat's element, attribute and prefix
    # tables, the tree builder's name cache): 10 MB of <n1/><n2/>... held 180 MB. Reading
    # stops at more names than any sitemap or feed uses, the entries before kept.
    filler = "".join(_NAMESAKE_SHAPES[shape].format(i=i) for i in range(n))
    doc = f"<urlset><url><loc>https://www.example.com/a</loc></url>{filler}</urlset>".encode()
    result, peak = _parsed_in(doc)
    assert peak < 8_000_000
    assert _urls(result) == ["https://www.example.com/a"] and result.error is not None


def test_a_feed_that_declares_its_namespaces_on_every_item_is_read_whole():
    items = "".join(
        f'<item xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:a{i % 50}="urn:x">'
        f'<link>https://www.example.com/{i}</link><dc:date>2026-01-01</dc:date><a{i % 50}:x k="v"/></item>'
        for i in range(20_000)
    )
    result = sm.parse(f"<rss><channel>{items}</channel></rss>".encode(), BASE)
    assert len(result.urls) == 20_000 and result.error is None


# --- scope --------------------------------------------------------------------------------


def test_scope_rules():
    sitemap = "http://www.example.com/catalog/sitemap.xml"
    assert sm.in_scope("http://www.example.com/catalog/show?item=23", sitemap)
    assert not sm.in_scope("http://www.example.com/image/show?item=23", sitemap)
    assert not sm.in_scope("https://www.example.com/catalog/x", sitemap)  # other scheme
    assert not sm.in_scope("http://www.example.com:8080/catalog/x", sitemap)  # other port
    assert not sm.in_scope("http://www.example.com.evil.org/catalog/x", sitemap)
    # A robots.txt naming the sitemap vouches for its whole origin (cross-submits too).
    assert sm.in_scope("http://www.example.com/image/x", sitemap, ("http://www.example.com",))
    assert sm.in_scope(
        "http://shop.example.net/a", "http://sitemaps.example.com/shop.xml", ("http://shop.example.net",)
    )


def test_cross_submitted_sitemap():
    doc = b"<urlset><url><loc>https://shop.example.net/a</loc></url><url><loc>https://sitemaps.example.com/b</loc></url></urlset>"
    assert sm.parse(doc, "https://sitemaps.example.com/shop/sm.xml").urls == []
    crossed = sm.parse(doc, "https://sitemaps.example.com/shop/sm.xml", robots_origins=("https://shop.example.net",))
    assert _urls(crossed) == ["https://shop.example.net/a"]


# --- dates --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026", (1767225600.0, 365 * 86400.0)),
        ("2024-02", (1706745600.0, 29 * 86400.0)),
        ("2026-05-01", (1777593600.0, 86400.0)),
        ("2026-05-01T10:42Z", (1777632120.0, 60.0)),
        ("2026-05-01T10:42:07Z", (1777632127.0, 0.0)),
        ("2026-05-01T10:42:07.123+05:30", (1777612327.0, 0.0)),
        ("2026-05-01T10:42:07-0700", (1777657327.0, 0.0)),
        ("2026-05-01T10:42:07", (1777632127.0, 0.0)),  # no zone: UTC
        (" 2026-05-01 ", (1777593600.0, 86400.0)),
    ],
)
def test_w3c_datetime(text, expected):
    assert sm.parse_w3c_datetime(text) == expected


@pytest.mark.parametrize("text", [None, "", "yesterday", "2026-13-01", "2026-02-30", "2026-05-01T25:00Z", "26-05-01"])
def test_w3c_datetime_rejects(text):
    assert sm.parse_w3c_datetime(text) is None


@settings(max_examples=300, deadline=None)
@given(
    when=st.datetimes(min_value=datetime.datetime(1000, 1, 1), max_value=datetime.datetime(9999, 12, 30)),
    zh=st.integers(0, 99),
    zm=st.integers(0, 99),
    sign=st.sampled_from("+-"),
    colon=st.booleans(),
)
def test_a_w3c_time_zone_is_hours_and_minutes_of_a_day(when, zh, zm, sign, colon):
    # TZD is hh:mm: a zone of 24 hours or more, or 60 minutes or more, is no zone (+99:99
    # moved the stated time by four days, and was kept as a lastmod).
    text = when.strftime("%Y-%m-%dT%H:%M:%S") + f"{sign}{zh:02d}{':' if colon else ''}{zm:02d}"
    got = sm.parse_w3c_datetime(text)
    if zh > 23 or zm > 59:
        assert got is None
    else:
        zone = datetime.timezone((1 if sign == "+" else -1) * datetime.timedelta(hours=zh, minutes=zm))
        assert got == (
            (when.replace(microsecond=0) - datetime.datetime(1970, 1, 1)).total_seconds()
            - zone.utcoffset(None).total_seconds(),
            0.0,
        )


def test_feed_dates():
    assert sm.parse_feed_date("Tue, 27 Oct 2026 10:42:07 +0000") == (1793097727.0, 0.0)
    assert sm.parse_feed_date("Tue, 27 Oct 2026 10:42:07 GMT") == (1793097727.0, 0.0)
    assert sm.parse_feed_date("Tue, 27 Oct 2026 12:42:07 +0200") == (1793097727.0, 0.0)
    assert sm.parse_feed_date("2026-10-27T10:42:07Z") == (1793097727.0, 0.0)
    assert sm.parse_feed_date("soon") is None


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


@st.composite
def _rfc5322_dates(draw):
    """An RFC 5322 date-time (with its obsolete 2- and 3-digit years) and its epoch seconds."""
    digits = draw(st.sampled_from((2, 3, 4)))
    year = draw({2: st.integers(1950, 2049), 3: st.integers(1900, 2899), 4: st.integers(1900, 9999)}[digits])
    written = {2: f"{year % 100:02d}", 3: f"{year - 1900:03d}", 4: f"{year}"}[digits]
    month = draw(st.integers(1, 12))
    day = draw(st.integers(1, calendar.monthrange(year, month)[1]))
    hh, mm = draw(st.integers(0, 23)), draw(st.integers(0, 59))
    ss = draw(st.one_of(st.none(), st.integers(0, 60)))  # 60: a leap second, read as :59
    sign, zh, zm = draw(st.sampled_from("+-")), draw(st.integers(0, 23)), draw(st.integers(0, 59))
    dow = _DAYS[calendar.weekday(year, month, day)] + ", " if draw(st.booleans()) else ""
    time = f"{hh:02d}:{mm:02d}" + ("" if ss is None else f":{ss:02d}")
    text = f"{dow}{day:02d} {_MONTHS[month - 1]} {written} {time} {sign}{zh:02d}{zm:02d}"
    offset = (1 if sign == "+" else -1) * (zh * 3600 + zm * 60)
    return text, calendar.timegm((year, month, day, hh, mm, min(ss or 0, 59), 0, 0, 0)) - offset


@settings(max_examples=500, deadline=None)
@given(_rfc5322_dates())
def test_an_rss_date_is_read_as_rfc_5322_says(case):
    # RFC 5322 §4.3: 2-digit years 00-49 are 20xx, 50-99 19xx, 3-digit years 1900 more
    # (email.utils read 50-68 as 2050-2068, which the lastmod trust counts as a lie, and
    # 103 as the year 103); §3.3: a leap second is a date (email.utils refused :60).
    text, epoch = case
    assert sm.parse_feed_date(text) == (float(epoch), 0.0)


@pytest.mark.parametrize("text", ["Mon, 01 Jan 2024 00:00:00 +0060", "Mon, 01 Jan 2024 00:00:00 -0199 (x)"])
def test_an_rss_date_whose_zone_has_more_than_59_minutes_is_no_date(text):
    assert sm.parse_feed_date(text) is None


# --- lastmod trust ------------------------------------------------------------------------

DAY = 86400.0
NOW = 1_800_000_000.0


def test_lastmod_claims():
    since = NOW - 2 * DAY
    assert sm.lastmod_claim(NOW - DAY, 0.0, since, NOW) is True
    assert sm.lastmod_claim(NOW - 3 * DAY, 0.0, since, NOW) is False
    assert sm.lastmod_claim(since - 100, DAY, since, NOW) is None  # same day as our visit
    assert sm.lastmod_claim(None, 0.0, since, NOW) is None
    assert sm.lastmod_claim(NOW - DAY, 0.0, None, NOW) is None  # never visited
    assert sm.lastmod_claim(NOW + 10 * DAY, 0.0, since, NOW) is None  # the future


def test_trust_learns_honest_and_lying_hosts():
    assert sm.LastmodTrust().score == 0.5
    honest = liar = sm.LastmodTrust()
    for i in range(50):
        changed = i % 3 == 0
        lastmod = NOW - DAY / 2 if changed else NOW - 5 * DAY
        honest = sm.observe_lastmod(honest, lastmod=lastmod, span=0.0, since=NOW - DAY, changed=changed, now=NOW)
        # A site that prints "now" as every page's lastmod.
        liar = sm.observe_lastmod(liar, lastmod=NOW - 60, span=0.0, since=NOW - DAY, changed=changed, now=NOW)
    assert honest.score > 0.95
    assert 0.3 < liar.score < 0.4  # right only when the page did change
    assert (
        sm.observe_lastmod(honest, lastmod=NOW + 30 * DAY, span=0.0, since=NOW - DAY, changed=True, now=NOW).disagree
        == 1
    )


def test_trust_evidence_is_capped_so_hosts_can_change():
    t = sm.LastmodTrust()
    for _ in range(1000):
        t = t.add(True)
    assert t.agree + t.disagree == pytest.approx(sm.LastmodTrust.MAX_EVIDENCE)
    for _ in range(200):
        t = t.add(False)
    assert t.score < 0.5
    assert sm.LastmodTrust(3, 1).merge(sm.LastmodTrust(1, 1)) == sm.LastmodTrust(4, 2)


def test_no_observation_without_a_claim():
    t = sm.LastmodTrust(5, 5)
    assert sm.observe_lastmod(t, lastmod=None, span=0.0, since=NOW - DAY, changed=True, now=NOW) is t
    assert sm.observe_lastmod(t, lastmod=NOW - DAY - 10, span=DAY, since=NOW - DAY, changed=True, now=NOW) is t
    assert sm.observe_lastmod(t, lastmod=NOW - 10, span=0.0, since=NOW - DAY, changed=None, now=NOW) is t


@given(
    st.floats(min_value=0, max_value=1),
    st.floats(min_value=0, max_value=1),
    st.floats(min_value=0, max_value=1),
)
def test_change_probability_with_lastmod(p, t1, t2):
    lo, hi = sorted((t1, t2))
    up = sm.lastmod_change_probability
    assert up(p, None, hi) == p
    # A "changed" claim raises the chance, more the more the host is trusted; "not changed" lowers it.
    assert p <= up(p, True, lo) <= up(p, True, hi) <= 1.0
    assert 0.0 <= up(p, False, hi) <= up(p, False, lo) <= p


def test_sitemap_priority():
    assert sm.lastmod_change_probability(0.2, True, 1.0) == 1.0
    assert sm.lastmod_change_probability(0.2, False, 1.0) == 0.0
    assert sm.sitemap_priority(0.8, 0.2, True, 0.0) == pytest.approx(0.16)  # an untrusted claim: the model
    assert sm.sitemap_priority(0.8, 0.2, True, 0.9) == pytest.approx(0.8 * 0.92)
    assert sm.sitemap_priority(0.8, 1.0, None, 0.5, hint_priority=1.0) == pytest.approx(1.0)
    assert sm.sitemap_priority(0.8, 1.0, None, 0.5, hint_priority=0.0) == pytest.approx(0.6)


def test_changefreq_prior():
    week = 1 / (7 * DAY)
    assert sm.changefreq_prior(None, 1.0, week) == week
    assert sm.changefreq_prior("hourly", 1.0, week) == pytest.approx(1 / 3600)
    assert sm.changefreq_prior("hourly", 0.0, week) == pytest.approx(week)
    assert week < sm.changefreq_prior("hourly", 0.5, week) < 1 / 3600


# --- the simweb's robots.txt and sitemap --------------------------------------------------


def test_simweb_robots_sitemap_and_sitemap_xml():
    """robots.txt's Sitemap: line -> RobotsRules.sitemaps() -> the served sitemap.xml parses
    to exactly the simweb's list (its truth), within scope."""
    web = SimWeb(hosts=24, seed=1, pages_per_host=30, port=8080)
    with_sitemap = [i for i in range(web.hosts) if web.host(i).robots.sitemaps]
    assert with_sitemap
    for i in with_sitemap:
        name = web.names[i]
        robots = web.respond(name, "/robots.txt")
        (sitemap_url,) = RobotsRules.parse(robots.body, "beamcrawl", robots.status).sitemaps()
        assert sitemap_url == f"http://{name}:8080/sitemap.xml"
        served = web.respond(name, "/sitemap.xml")
        assert served.status == 200 and sm.sniff(served.body) == "urlset"
        doc = sm.parse(served.body, sitemap_url, robots_origins=(f"http://{name}:8080",))
        assert _urls(doc) == web.sitemap_links(i)
        assert doc.skipped == 0 and doc.error is None
        assert _urls(sm.parse(io.BytesIO(gzip.compress(served.body)), sitemap_url)) == web.sitemap_links(i)


@pytest.mark.slow
@pytest.mark.parametrize("token", [b"<!--%s-->", b'<x a="%s"/>'])
def test_one_huge_token_is_fed_to_the_parser_in_few_chunks(monkeypatch, token):
    # Expat rescans an unfinished token from its start at every feed: a 50 MiB comment fed
    # 64 KiB at a time was ~800 feeds and 30-40 s of CPU for a 50 KB gzip download (#24).
    feeds = []
    real = sm._xml_parser

    def counting(target):
        parser = real(target)
        feed = parser.feed
        parser.feed = lambda data: (feeds.append(len(data)), feed(data))[1]
        return parser

    monkeypatch.setattr(sm, "_xml_parser", counting)
    big = token % (b" " * (sm.MAX_BYTES - 4096))
    body = b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://a.test/1</loc></url>'
    doc = sm.parse(gzip.compress(body + b"<url>" + big + b"</url></urlset>"), "http://a.test/s.xml.gz")
    assert _urls(doc) == ["http://a.test/1"] and doc.error is None and doc.truncated is None
    assert sum(feeds) <= sm.MAX_BYTES and len(feeds) <= 16
