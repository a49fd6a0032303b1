"""Fuzzing: every parser that reads what servers send, fed random and truncated bytes.

What a hostile or broken server can send must never raise out of a parser (a raise would fail
the page's whole bundle), and what the parsers emit must keep their documented properties:
links normalised and fingerprinted, robots.txt always reachable, charsets that decode.

Each property is capped in examples so the whole file runs in a few seconds; the seeds'
corpus of real documents is cut at every kind of boundary by hypothesis.
(No sitemap parser exists yet: fuzz it here when it lands.)
"""

from __future__ import annotations

import gzip
import zlib

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from beamcrawl.core.content import sitemaps, sniff
from beamcrawl.core.urls import urlshape
from beamcrawl.core.content.htmlparse import MAX_ANCHOR_CHARS, PageLinks, parse_html
from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.core.net.transfer import decode_content
from beamcrawl.core.urls.urlnorm import MAX_URL_LENGTH, InvalidURL, fingerprint, normalize

TOKEN = "beamcrawl"
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOME = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- corpora -----------------------------------------------------------------------------------

HTML_PAGE = """<!DOCTYPE html>
<html lang="fr"><head>
<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">
<title>Caf\u00e9 &amp; cr\u00e8me \u2014 test</title>
<base href="/section/">
<link rel="canonical" href="https://example.com/section/page">
<meta name="robots" content="index, nofollow">
<!-- <a href="/commented-out">no</a> -->
<script>var s = "<a href='/in-script'>";</script>
<style>a[href^="/x"] { color: red }</style>
</head><body>
<p>Unclosed <b>bold <i>italic</p>
<a href="rel.html">Relative</a> <a href='../up.html#frag'>Up</a>
<a href=/unquoted?q=1&amp;utm_source=x>Unquoted</a>
<a href="http://other.example:80/x">Other</a>
<a href="HTTPS://UPPER.EXAMPLE/Path">Upper</a>
<a href="  \t/spaces  ">Spaces</a> <a href="javascript:void(0)">js</a>
<a href="http://[::1">bad ipv6</a> <a href="http://exa mple.com/">space host</a>
<a href="/caf\u00e9?\u00e9=\u00e8">non-ascii</a>
<area href="map.html"><iframe src="//cdn.example/frame"></iframe>
<table><tr><td><a href="/t">in table</td></tr>
<a href="/unterminated
"""

ROBOTS = (
    b"\xef\xbb\xbfUser-agent: *\r\nDisallow: /private/\r\nAllow: /private/ok$\r\nCrawl-delay: 2\r\n\r\n"
    b"User-agent: beamcrawl/1.0\nDisallow: /*.php$\nDisallow: /tmp\nSitemap: https://example.com/s.xml\n"
    b"User-agent: other\nDisallow: /\n# comment\nNoindex: /x\n"
)

_html_tokens = st.sampled_from(
    [
        "<a href='",
        "<a href=",
        '">',
        "'>",
        "</a>",
        "<base href='",
        "<meta name=robots content='",
        "<link rel=canonical href='",
        "<!--",
        "-->",
        "<script>",
        "</script>",
        "<iframe src=",
        "<area href=",
        "http://",
        "https://",
        "//",
        "/",
        "../",
        "./",
        "?",
        "#",
        "&amp;",
        "%",
        "%zz",
        "%C3%A9",
        "\u00e9",
        "\x00",
        "\ufffd",
        "<",
        ">",
        " ",
        "\n",
        "a",
        "b.html",
        "javascript:",
        "mailto:",
        "[",
        "]",
        ":",
        "@",
        ":8080",
        "<base href=http://x.example/>",
        "<title>",
        "</title>",
    ]
)


def _check_links(out: PageLinks) -> None:
    """The parser's output contract, for any input."""
    for url, fp, anchor, nofollow, kind in out.links:
        assert url.startswith(("http://", "https://")) and url.isascii()
        assert len(url) <= MAX_URL_LENGTH
        assert normalize(url) == url
        assert fp == fingerprint(url)
        assert len(anchor) <= MAX_ANCHOR_CHARS
        assert isinstance(nofollow, bool)
        assert kind in ("a", "area", "frame", "canonical")
    assert out.invalid_links >= 0


# --- HTML ---------------------------------------------------------------------------------------


@FAST
@given(st.binary(max_size=2000))
def test_html_random_bytes(body: bytes) -> None:
    _check_links(parse_html(body, "http://fuzz.example/dir/page.html"))


@FAST
@given(
    st.lists(_html_tokens, max_size=60).map("".join),
    st.sampled_from(["utf-8", "cp1252", "utf-16", "shift_jis"]),
)
def test_html_token_soup(text: str, encoding: str) -> None:
    body = text.encode(encoding, errors="replace")
    out = parse_html(body, "https://fuzz.example/a/b", f"text/html; charset={encoding}")
    _check_links(out)


@FAST
@given(
    st.integers(0, len(HTML_PAGE.encode("cp1252", "replace"))),
    st.sampled_from(["", "text/html", "text/html; charset=bogus"]),
)
def test_html_truncated_anywhere(cut: int, content_type: str) -> None:
    body = HTML_PAGE.encode("cp1252", "replace")[:cut]
    _check_links(parse_html(body, "http://example.com/page.html", content_type))


def test_html_full_corpus_page_parses_as_expected() -> None:
    out = parse_html(HTML_PAGE.encode("cp1252", "replace"), "http://example.com/page.html")
    _check_links(out)
    urls = {u for u, *_ in out.links}
    assert "http://example.com/section/rel.html" in urls
    assert "http://example.com/unquoted?q=1" in urls
    assert "https://upper.example/Path" in urls
    assert "http://example.com/commented-out" not in urls and "http://example.com/in-script" not in urls
    assert out.meta_nofollow and out.canonical == "https://example.com/section/page"


@SOME
@given(st.binary(min_size=1, max_size=300), st.integers(1, 50))
def test_html_huge_attribute_and_deep_nesting_are_bounded(junk: bytes, depth: int) -> None:
    body = b"<div>" * (depth * 20) + b"<a href='/" + junk * 50 + b"'>" + junk + b"</a>"
    _check_links(parse_html(body, "http://example.com/"))


# --- robots.txt ---------------------------------------------------------------------------------


_robots_path = st.text(alphabet=st.sampled_from("/abcpx.$*?=%&0123456789tmprivateokhp"), max_size=20).map(
    lambda s: "/" + s
)


@FAST
@given(st.binary(max_size=600), _robots_path)
def test_robots_random_bytes_keep_robots_txt_reachable(body: bytes, path: str) -> None:
    rules = RobotsRules.from_fetch(200, body, TOKEN)
    assert rules.allowed("/robots.txt") and rules.allowed("https://h.example/robots.txt")
    rules.allowed(path)
    assert rules.crawl_delay() is None or rules.crawl_delay() >= 0


@FAST
@given(st.integers(0, len(ROBOTS)), _robots_path)
def test_robots_truncated_anywhere(cut: int, path: str) -> None:
    rules = RobotsRules.parse(ROBOTS[:cut], TOKEN)
    rules.allowed(path)
    rules.sitemaps()
    assert RobotsRules.from_dict(rules.to_dict()).allowed(path) == rules.allowed(path)


@FAST
@given(st.lists(st.sampled_from(ROBOTS.replace(b"\r\n", b"\n").split(b"\n")), max_size=12), _robots_path)
def test_robots_line_endings_and_bom_do_not_matter(lines: list[bytes], path: str) -> None:
    lines = [line.lstrip(b"\xef\xbb\xbf") for line in lines]
    lf = b"\n".join(lines)
    variants = [lf, lf.replace(b"\n", b"\r\n"), lf.replace(b"\n", b"\r"), b"\xef\xbb\xbf" + lf]
    verdicts = {RobotsRules.parse(v, TOKEN).allowed(path) for v in variants}
    assert len(verdicts) == 1


@FAST
@given(st.one_of(st.none(), st.integers(0, 999)), st.one_of(st.none(), st.binary(max_size=200)), _robots_path)
def test_robots_any_fetch_outcome(status: int | None, body: bytes | None, path: str) -> None:
    rules = RobotsRules.from_fetch(status, body, TOKEN)
    assert rules.allowed("/robots.txt")
    if status is None or status == 429 or 500 <= status < 600:
        assert not rules.allowed(path if path != "/robots.txt" else "/x")
    elif 300 <= status < 500:
        assert rules.allowed(path)


# --- URL normalisation ------------------------------------------------------------------------

_url_parts = st.sampled_from(
    [
        "http://",
        "https://",
        "HTTP://",
        "ftp://",
        "//",
        "/",
        "../",
        "./",
        "?",
        "#",
        "@",
        ":",
        ":80",
        ":99999",
        "[",
        "]",
        "::1",
        "%",
        "%2F",
        "%zz",
        "%C3%A9",
        "\u00e9",
        "\u3002",
        "xn--",
        "a",
        "b.example",
        "127.0.0.1",
        "0x7f.1",
        " ",
        "\t",
        "\n",
        "\x00",
        ";jsessionid=1",
        "utm_source=x",
        "&",
        "=",
        "\udcff",
    ]
)


@FAST
@given(
    st.lists(_url_parts, max_size=16).map("".join),
    st.one_of(
        st.none(),
        st.sampled_from(["http://base.example/a/b?q", "https://[::1]:8443/", "http://base.example"]),
    ),
)
def test_normalize_only_raises_invalid_url_and_is_idempotent(url: str, base: str | None) -> None:
    try:
        once = normalize(url, base)
    except InvalidURL:
        return
    assert normalize(once) == once
    assert once.isascii() and "#" not in once and len(once) <= MAX_URL_LENGTH
    assert urlshape.check(once) in (None, *urlshape.REASONS)


@FAST
@given(st.binary(max_size=120))
def test_normalize_hrefs_from_undecodable_bytes(raw: bytes) -> None:
    for href in (raw.decode("utf-8", "surrogateescape"), raw.decode("latin-1")):
        try:
            once = normalize(href, "http://base.example/dir/")
        except InvalidURL:
            continue
        assert normalize(once) == once


# --- sniffing and charsets -------------------------------------------------------------------

_content_types = st.one_of(
    st.none(),
    st.sampled_from(
        [
            "text/html",
            "text/html; charset=",
            'text/html; charset="',
            "text/html;charset=utf-16",
            "application/octet-stream",
            "image/png",
            ";;;",
            "text/html; charset=x" * 50,
            "TEXT/HTML ; CHARSET = KOI8-R",
        ]
    ),
    st.text(max_size=60),
)


@FAST
@given(_content_types, st.binary(max_size=1200))
def test_sniff_any_bytes(content_type: str | None, body: bytes) -> None:
    kind = sniff.sniff(content_type, body)
    assert kind in ("html", "xhtml", "xml", "text") or kind.removeprefix("binary:") in sniff.BINARY_KINDS
    text, charset = sniff.decode_html(body, content_type, detect=False)
    assert isinstance(text, str) and charset.source in (
        "bom",
        "header",
        "meta",
        "utf-8",
        "detected",
        "default",
    )


@SOME
@given(st.binary(min_size=1, max_size=3000))
def test_charset_detector_on_random_bytes(body: bytes) -> None:
    text, charset = sniff.decode_html(body)
    body.decode(charset.encoding, errors="replace")


@FAST
@given(st.text(max_size=300), st.integers(0, 1200))
def test_utf8_cut_anywhere_is_still_utf8(text: str, cut: int) -> None:
    body = ("<p>" + text).encode("utf-8")[:cut]
    assume(b"\xef\xbb\xbf" not in body[:3] and not body.startswith((b"\xfe\xff", b"\xff\xfe")))
    label = sniff.detect_charset(body)
    assert label.encoding == "utf-8" or label.source == "meta"


@FAST
@given(st.integers(0, 4200))
def test_meta_charset_truncated_anywhere(cut: int) -> None:
    body = (
        b"<html><head>" + b"<!-- x -->" * 300 + b'<meta http-equiv="content-type" content="text/html; charset=koi8-r">'
    )
    charset = sniff.detect_charset(body[:cut], detect=False)
    assert charset.encoding in ("koi8-r", "utf-8")


# --- content decoding ----------------------------------------------------------------------------

_PAYLOAD = HTML_PAGE.encode("utf-8") * 20


@FAST
@given(
    st.binary(max_size=500),
    st.sampled_from(["gzip", "deflate", "br", "gzip, deflate", "zstd", "identity", "", None]),
    st.integers(0, 5000),
)
def test_decode_content_random_bytes(raw: bytes, encoding: str | None, cap: int) -> None:
    out = decode_content(raw, encoding, cap)
    assert len(out.body) <= max(cap, len(raw))
    assert not (out.truncated and out.error)


@FAST
@given(st.sampled_from(["gzip", "deflate"]), st.integers(0, 4000), st.integers(1, 100_000))
def test_decode_content_truncated_streams_give_a_prefix(encoding: str, cut: int, cap: int) -> None:
    raw = gzip.compress(_PAYLOAD) if encoding == "gzip" else zlib.compress(_PAYLOAD)
    out = decode_content(raw[:cut], encoding, cap)
    if out.error is None and cut > 0:
        assert _PAYLOAD.startswith(out.body) and len(out.body) <= cap


# --- hostile charset labels ---------------------------------------------------------------------

# Labels Python's codec registry knows but that are no text encoding a page may use: some
# refuse errors="replace" (idna, undefined), some reject non-ASCII input (punycode), some hide
# markup (utf-7, which browsers refuse to honour).
HOSTILE_LABELS = [
    "idna",
    "punycode",
    "undefined",
    "utf-7",
    "unicode_escape",
    "raw_unicode_escape",
    "base64",
    "rot13",
    "zlib",
    "uu",
    "hex",
    "quopri",
    "bz2",
    "utf-32",
    "mbcs",
    "cp65001",
    "hz",
    "x" * 60,
]
_BODY_AFTER_META = b"<a href=/x>x</a>\xff\xfe\x80 +ADw-a href=/utf7-hidden+AD4-"


def test_sniff_refuses_hostile_charset_labels() -> None:
    for label in HOSTILE_LABELS:
        for body, content_type in (
            (b"<meta charset=" + label.encode() + b">" + _BODY_AFTER_META, None),
            (_BODY_AFTER_META, f"text/html; charset={label}"),
        ):
            text, charset = sniff.decode_html(body, content_type)
            assert charset.encoding not in ("utf-7", "idna", "punycode", "undefined"), label
            assert "/x" in text


def test_parse_html_survives_hostile_charset_labels() -> None:
    for label in HOSTILE_LABELS:
        body = b"<meta charset=" + label.encode() + b">" + _BODY_AFTER_META
        out = parse_html(body, "http://e.example/")
        assert [u for u, *_ in out.links] == ["http://e.example/x"], label


# --- sitemaps and feeds -------------------------------------------------------------------------

SITEMAP = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>https://example.com/a?utm_source=x&amp;b=1</loc><lastmod>2024-05-01T10:00:00+02:00</lastmod>
       <changefreq>daily</changefreq><priority>0.8</priority></url>
  <url><loc> https://example.com/b </loc><lastmod>2024-13-45</lastmod></url>
  <url><loc>https://other.example/out-of-scope</loc></url>
  <url><loc>javascript:alert(1)</loc></url>
  <url><loc>/relative</loc><priority>NaN</priority></url>
</urlset>
"""
FEED = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
<item><link>https://example.com/post/1</link><pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate></item>
<item><guid isPermaLink="true">https://example.com/post/2</guid></item></channel></rss>"""
ATOM = b"""<feed xmlns="http://www.w3.org/2005/Atom" xml:base="https://example.com/blog/">
<entry><link rel="alternate" href="p1"/><updated>2024-01-01T00:00:00Z</updated></entry></feed>"""
XML_BOMB = b"""<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>
<urlset><url><loc>https://example.com/&lol2;</loc></url></urlset>"""
XXE = b"""<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><urlset><url><loc>&e;</loc></url></urlset>"""
SITEMAP_CORPUS = [
    SITEMAP,
    FEED,
    ATOM,
    gzip.compress(SITEMAP),
    b"https://example.com/t1\nhttps://example.com/t2\n",
]


def _check_document(doc: object) -> None:
    kinds = ("urlset", "sitemapindex", "rss", "atom", "text", "unknown")
    assert doc.kind in kinds  # type: ignore[attr-defined]
    for entry in [*doc.urls, *doc.sitemaps]:  # type: ignore[attr-defined]
        assert normalize(entry.url) == entry.url
        assert entry.priority is None or 0 <= entry.priority <= 1
    assert doc.truncated in (None, "urls", "bytes")  # type: ignore[attr-defined]


@FAST
@given(st.binary(max_size=1500))
def test_sitemap_random_bytes(data: bytes) -> None:
    sm = sitemaps
    _check_document(sm.parse(data, "https://example.com/sitemap.xml"))
    sm.sniff(data)


@FAST
@given(st.sampled_from(range(len(SITEMAP_CORPUS))), st.floats(0, 1))
def test_sitemap_truncated_anywhere(which: int, fraction: float) -> None:
    sm = sitemaps
    data = SITEMAP_CORPUS[which]
    cut = data[: int(len(data) * fraction)]
    doc = sm.parse(cut, "https://example.com/sitemap.xml")
    _check_document(doc)
    sm.sniff(cut)


@SOME
@given(
    st.lists(
        st.sampled_from(
            [
                b"<url>",
                b"</url>",
                b"<loc>",
                b"</loc>",
                b"https://example.com/",
                b"x",
                b"&amp;",
                b"&",
                b"<![CDATA[",
                b"]]>",
                b"<!--",
                b"-->",
                b"<urlset>",
                b"</urlset>",
                b"\x00",
                b"\xff",
                b"<?xml version='1.0'?>",
                b"<sitemapindex>",
                b"<sitemap>",
                b"<lastmod>",
                b"2024-02-30",
                b"</lastmod>",
                b"<priority>",
                b"1e999",
                b"</priority>",
            ]
        ),
        max_size=40,
    ).map(b"".join)
)
def test_sitemap_token_soup(data: bytes) -> None:
    _check_document(sitemaps.parse(data, "https://example.com/sitemap.xml"))


def test_sitemap_entities_are_refused_not_expanded() -> None:
    sm = sitemaps
    for hostile in (XML_BOMB, XXE):
        doc = sm.parse(hostile, "https://example.com/sitemap.xml")
        _check_document(doc)
        assert doc.error is not None and not any("lol" in e.url or "passwd" in e.url for e in doc.urls)
