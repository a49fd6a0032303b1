"""HTML parsing: absolute links, <base>, canonical, nofollow, meta robots, broken markup."""

from __future__ import annotations

from beamcrawl.core.content.htmlparse import checksum, is_html, parse_html, robots_directives
from beamcrawl.core.urls.urlnorm import fingerprint

PAGE = b"""<!doctype html><html><head>
<title>  A   page </title>
<base href="http://Example.com/dir/sub/">
<link rel="canonical" href="/canonical.html">
<meta name="robots" content="noindex">
</head><body>
<a href="rel.html">Relative <b>anchor</b></a>
<a href="../up.html#frag">Up</a>
<a href="/root.html" rel="nofollow noopener">Root</a>
<a href="http://other.org:80/x?utm_source=a&amp;b=1">Other</a>
<a href="mailto:x@y.z">mail</a><a href="javascript:void(0)">js</a><a href="#top">top</a>
<a href="http://[bad">bad</a>
<a href="rel.html">duplicate</a>
<area href="map.html"><iframe src="frame.html"></iframe>
</body></html>"""


def test_links_are_absolute_normalised_and_fingerprinted():
    out = parse_html(PAGE, "http://example.com/page.html", "text/html; charset=utf-8")
    urls = [(u, kind) for u, _, _, _, kind in out.links]
    assert ("http://example.com/dir/sub/rel.html", "a") in urls
    assert ("http://example.com/dir/up.html", "a") in urls
    assert ("http://example.com/root.html", "a") in urls
    assert ("http://other.org/x?b=1", "a") in urls
    assert ("http://example.com/dir/sub/map.html", "area") in urls
    assert ("http://example.com/dir/sub/frame.html", "frame") in urls
    assert ("http://example.com/canonical.html", "canonical") in urls
    assert len([u for u in urls if u[0].endswith("rel.html")]) == 1
    assert not any(u.startswith(("mailto", "javascript")) for u, _ in urls)
    for url, fp, *_ in out.links:
        assert fp == fingerprint(url)
    assert out.canonical == "http://example.com/canonical.html"
    assert out.invalid_links == 1


def test_anchor_nofollow_title_and_meta_robots():
    out = parse_html(PAGE, "http://example.com/page.html")
    by = {u: (anchor, nofollow) for u, _, anchor, nofollow, _ in out.links}
    assert by["http://example.com/dir/sub/rel.html"] == ("Relative anchor", False)
    assert by["http://example.com/root.html"] == ("Root", True)
    assert out.title == "A page"
    assert out.meta_noindex and not out.meta_nofollow


def test_meta_robots_for_our_token_and_for_others():
    html = b'<meta name="beamcrawl" content="nofollow"><meta name="otherbot" content="noindex"><a href="/a">a</a>'
    out = parse_html(html, "http://e.com/")
    assert out.meta_nofollow and not out.meta_noindex


def test_x_robots_tag_scoping():
    assert robots_directives(["noindex, nofollow"], "beamcrawl") == (True, True)
    assert robots_directives(["otherbot: noindex"], "beamcrawl") == (False, False)
    assert robots_directives(["BeamCrawl: nofollow"], "beamcrawl") == (False, True)
    assert robots_directives(["none"], "beamcrawl") == (True, True)


def test_broken_markup_and_charsets_do_not_break_parsing():
    out = parse_html(b"<html><a href='/x'>unclosed <div><a href=/y>y", "http://e.com/")
    assert {u for u, *_ in out.links} == {"http://e.com/x", "http://e.com/y"}
    latin = "<a href='/caf\xe9'>caf\xe9</a>".encode("latin-1")
    out = parse_html(latin, "http://e.com/", "text/html; charset=iso-8859-1")
    assert out.links[0][0] == "http://e.com/caf%C3%A9"
    assert parse_html(b"\xff\xfe\x00garbage<<<>>>", "http://e.com/").links == []


def test_checksum_and_content_types():
    assert checksum(b"abc") == checksum(b"abc") != checksum(b"abd")
    assert len(checksum(b"")) == 16
    assert is_html("text/html; charset=utf-8") and is_html("application/xhtml+xml")
    assert not is_html("application/pdf") and not is_html("")
