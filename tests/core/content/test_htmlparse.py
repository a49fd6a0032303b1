"""HTML parsing: absolute links, <base>, canonical, nofollow, meta robots, broken markup."""

from __future__ import annotations

import time
from urllib.parse import quote

from beamcrawl.core.content.htmlparse import MAX_ANCHOR_CHARS, checksum, is_html, parse_html, robots_directives
from beamcrawl.core.content.sniff import codec_for_label
from beamcrawl.core.urls.urlnorm import InvalidURL, fingerprint, normalize
from beamcrawl.schemas.records import Link, follow_rows

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


# --- links as a browser resolves them (#24 item 9 and the link classes) ----------------------

import pytest  # noqa: E402
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from beamcrawl.core.content.htmlparse import refresh_target  # noqa: E402


@pytest.mark.parametrize(
    ("base", "href", "expected"),
    [
        # No <base>: "" and "#x" are the page itself, which is no new link.
        (None, "", []),
        (None, "#x", []),
        (None, "  #x ", []),
        # A <base> elsewhere: both are the base's document (fragment dropped), as in a browser;
        # the two real pages of the issue lost their link to the site's home this way.
        ("http://a.example/", "", ["http://a.example/"]),
        ("http://a.example/", "#top", ["http://a.example/"]),
        ("/home?lang=en", "", ["http://a.example/home?lang=en"]),
        ("/home?lang=en", "#x", ["http://a.example/home?lang=en"]),
        ("http://b.example/dir/", "#x", ["http://b.example/dir/"]),
        # A <base> that is the page itself: nothing.
        ("http://a.example/dir/page.html", "#x", []),
    ],
)
def test_empty_and_fragment_hrefs_are_the_bases_document(base: str | None, href: str, expected: list[str]) -> None:
    head = f'<base href="{base}">' if base is not None else ""
    html = f'<html><head>{head}</head><body><a href="{href}">home</a></body></html>'.encode()
    out = parse_html(html, "http://a.example/dir/page.html")
    assert [url for url, *_ in out.links] == expected
    assert out.invalid_links == 0


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("0; url=/next", "/next"),
        ("5;URL='http://b.example/x'", "http://b.example/x"),
        ('1.5 , url = "/q?a=1" trailing', "/q?a=1"),
        ("0; /bare", "/bare"),
        ("0 url=/spaced", "/spaced"),
        ("3", None),  # a reload of the page itself
        ("0; url=", None),
        ("url=/x", None),  # no time: not a refresh (HTML's declarative refresh steps)
        ("x; url=/x", None),
        ("0x; url=/x", None),
    ],
)
def test_refresh_target_is_read_as_html_reads_it(content: str, expected: str | None) -> None:
    assert refresh_target(content) == expected


def test_meta_refresh_targets_are_links_of_their_own_kind() -> None:
    html = b"""<html><head><base href="http://a.example/base/">
    <meta http-equiv="Refresh" content="0; url=moved.html">
    <meta http-equiv="refresh" content="30">
    <meta http-equiv="content-type" content="text/html">
    </head><body><a href="moved.html">moved</a></body></html>"""
    out = parse_html(html, "http://a.example/page")
    assert [(url, kind) for url, _, _, _, kind in out.links] == [
        ("http://a.example/base/moved.html", "refresh"),
        ("http://a.example/base/moved.html", "a"),
    ]


_JAPANESE = st.text(st.sampled_from("あいうえおかきくけこ日本語東京検索漢字ソ表能"), min_size=1, max_size=8)
_CHINESE = st.text(st.sampled_from("中文搜索北京汉字测试网页"), min_size=1, max_size=8)


def _percent(data: bytes) -> str:
    # The bytes as the URL standard's query percent-encode set writes them, and then as the
    # normaliser writes every query: letters and digits raw, every other byte escaped but
    # the sub-delimiters it keeps ("\\" and the like are escaped anyway).
    keep = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&()*+,;=:@/?"
    return "".join(chr(b) if b in keep else f"%{b:02X}" for b in data)


@settings(max_examples=60, deadline=None)
@given(words=st.one_of(_JAPANESE.map(lambda w: (w, "shift_jis")), _CHINESE.map(lambda w: (w, "gbk"))))
def test_a_links_query_is_written_in_the_pages_encoding(words: tuple[str, str]) -> None:
    # WHATWG URL standard: a link on a Shift_JIS or GBK page has its query encoded in that
    # encoding (the path stays UTF-8), which is what a browser requests.
    word, encoding = words
    html = f'<html><head><meta charset="{encoding}"></head><body><a href="/路/?q={word}">x</a></body></html>'
    out = parse_html(html.encode(encoding, "strict"), "http://a.example/")
    [(url, *_)] = out.links
    assert url == "http://a.example/%E8%B7%AF/?q=" + _percent(word.encode(encoding))


def test_a_character_the_pages_encoding_cannot_write_is_a_numeric_reference() -> None:
    # The page writes "&#26085;" (windows-1252 has no 日): the parser gives the character, and
    # the URL standard writes what the page's encoding cannot as "&#26085;", percent-encoded.
    out = parse_html(b'<meta charset="windows-1252"><a href="/s?q=&#26085;&amp;r=\xe9">x</a>', "http://a.example/")
    assert [url for url, *_ in out.links] == ["http://a.example/s?q=%26%2326085%3B&r=%E9"]


def test_utf8_pages_keep_utf8_queries() -> None:
    out = parse_html('<meta charset="utf-8"><a href="/s?q=日本">x</a>'.encode(), "http://a.example/")
    assert [url for url, *_ in out.links] == ["http://a.example/s?q=%E6%97%A5%E6%9C%AC"]


# --- a <base href> of another scheme ----------------------------------------------------------


@pytest.mark.parametrize("base", ["file:///C:/site/", "FILE:///x/", "fi\tle:///x/", "ftp://files.example/pub/"])
def test_a_base_of_another_scheme_is_the_base_of_the_relative_links(base: str) -> None:
    """A browser resolves ``doc.html`` under ``<base href="file:///C:/site/">`` (a page saved
    from a disk) to ``file:///C:/site/doc.html``: no link to crawl. The page's URL was taken
    for the base instead, and the crawler asked the page's host for pages it never linked."""
    html = (
        f'<html><head><base href="{base}"><link rel="canonical" href="c.html"></head><body>'
        '<a href="doc.html">d</a><a href="/root">r</a><a href="//cdn.example/x">c</a><a href="">e</a>'
        '<a href="http://abs.example/">a</a></body></html>'
    ).encode()
    out = parse_html(html, "http://page.example/dir/p.html")
    assert [url for url, *_ in out.links] == ["http://abs.example/"]
    assert out.canonical is None and out.invalid_links == 4


def _browser_link(href: str, base: str, page: str) -> str | None:
    """The http(s) URL a browser's parser (ada) makes of ``href`` under ``<base href=base>``
    on ``page`` (a base it cannot parse leaves the page's URL as the base), in normal form."""
    import ada_url

    try:
        base = ada_url.URL(base, base=page).href
    except ValueError:
        base = page
    try:
        resolved = ada_url.URL(href, base=base).href
        return normalize(resolved) if resolved.startswith(("http:", "https:")) else None
    except (ValueError, InvalidURL):
        return None


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["file:", "ftp:", "FTP:", "ws:", "wss:", "foo:", "mailto:", "about:", "x-y.z+1:"]),
    st.lists(st.sampled_from(["//", "/", "h.example", "a b", "C:", "a", "..", "?q", "#f", "\\"]), max_size=5).map(
        "".join
    ),
    st.sampled_from(
        ["doc.html", "../up", "/root", "//cdn.example/x", "?q", "", "#f", "http:x", "https:y", "HTTP://abs.example/z"]
    ),
)
def test_links_under_a_base_of_another_scheme_are_the_browsers(scheme: str, rest: str, href: str) -> None:
    """Over generated bases of other schemes, which browsers may or may not parse: a link
    the crawler keeps is the one a browser follows (never a path on the page's host that
    the page did not link), and a relative one under a base browsers parse is none."""
    pytest.importorskip("ada_url")
    page = "http://page.example/dir/p.html"
    base = scheme + rest
    html = f'<html><head><base href="{base}"></head><body><a href="{href}">x</a></body></html>'.encode()
    found = [url for url, *_ in parse_html(html, page).links]
    assert found in ([], [_browser_link(href, base, page)]), (base, href)
    if href in ("doc.html", "../up", "/root", "?q"):
        import ada_url

        try:
            ada_url.URL(base, base=page)
        except ValueError:
            return
        assert found == []


# Directives as the search engines document them: a comma-separated (or space-separated)
# list, case-insensitive, ``none`` for both; some take a value after a colon; any other
# ``name:`` names the agent the directives from there on are for.
_DIRECTIVES = st.sampled_from(
    [
        "noindex",
        "nofollow",
        "none",
        "all",
        "noarchive",
        "nosnippet",
        "max-snippet:20",
        "max-snippet: -1",
        "max-image-preview:large",
        "max-video-preview:0",
        "unavailable_after: 25 Jun 2030 15:00:00 PST",
        "unavailable_after: 2030-06-25T15:00:00Z",
    ]
)
_AGENTS = st.sampled_from(["beamcrawl", "otherbot", "googlebot-news", "360Spider"])


def _cased(draw: st.DrawFn, text: str) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c for c in text)


@st.composite
def _directive_groups(draw: st.DrawFn) -> list[tuple[str | None, list[str], str]]:
    """Groups of directives, each after an agent's name but maybe the first, with its text."""
    groups = []
    for i in range(draw(st.integers(1, 4))):
        agent = draw(st.none() | _AGENTS) if i == 0 else draw(_AGENTS)
        words = draw(st.lists(_DIRECTIVES, min_size=1, max_size=4))
        text = draw(st.sampled_from([",", ", ", " ,", " ", "  "])).join(_cased(draw, w) for w in words)
        if agent is not None:
            text = _cased(draw, agent) + draw(st.sampled_from([":", ": ", " : "])) + text
        groups.append((agent, words, text))
    return groups


@given(groups=_directive_groups())
@example(groups=[(None, ["max-snippet:20", "nofollow"], "max-snippet:20, nofollow")])
@example(
    groups=[
        (
            None,
            ["nofollow", "unavailable_after: 25 Jun 2030 15:00:00 PST"],
            "nofollow,unavailable_after: 25 Jun 2030 15:00:00 PST",
        )
    ]
)
@example(groups=[(None, ["noindex"], "noindex"), ("otherbot", ["nofollow"], "otherbot: nofollow")])
@example(groups=[("otherbot", ["noindex"], "otherbot: noindex"), ("beamcrawl", ["nofollow"], "beamcrawl: nofollow")])
@example(groups=[(None, ["noindex", "nofollow"], "noindex nofollow")])
@settings(max_examples=400, deadline=None)
def test_robots_directives_are_read_as_the_search_engines_document_them(groups) -> None:
    ours = [w.lower() for agent, words, _ in groups if agent in (None, "beamcrawl") for w in words]
    expected = ("noindex" in ours or "none" in ours, "nofollow" in ours or "none" in ours)
    # One field line, or two combined into one (RFC 9110 §5.3): the same directives for us.
    assert robots_directives([",".join(text for _, _, text in groups)], "beamcrawl") == expected
    assert robots_directives([text for _, _, text in groups], "beamcrawl") == expected


def test_a_nofollow_meant_for_us_keeps_the_pages_links_out() -> None:
    html = b'<meta name="robots" content="max-snippet:50, nofollow"><a href="/a">a</a>'
    out = parse_html(html, "http://e.com/")
    assert out.meta_nofollow
    assert list(follow_rows([Link(u, fp, a, nf, k) for u, fp, a, nf, k in out.links], out.meta_nofollow)) == []
    html = b'<meta name="robots" content="max-snippet:50, otherbot: nofollow"><a href="/a">a</a>'
    assert not parse_html(html, "http://e.com/").meta_nofollow


_RELS = st.sampled_from([None, "nofollow", "NoFollow noopener", "ugc\tnofollow", "noopener", "", "external"])


@given(anchors=st.lists(st.tuples(st.sampled_from(["/a", "/b", "/c"]), _RELS), min_size=1, max_size=8))
@example(anchors=[("/a", "nofollow"), ("/a", None)])
@settings(max_examples=200, deadline=None)
def test_a_target_linked_twice_is_followed_when_any_of_its_links_may_be(anchors) -> None:
    html = "".join(
        f'<a href="{href}"' + ("" if rel is None else f' rel="{rel}"') + f">{i}</a>"
        for i, (href, rel) in enumerate(anchors)
    )
    out = parse_html(html.encode(), "http://e.com/")
    followed = {u for u, *_ in follow_rows([Link(u, fp, a, nf, k) for u, fp, a, nf, k in out.links], False)}
    allowed = {"http://e.com" + href for href, rel in anchors if rel is None or "nofollow" not in rel.lower().split()}
    assert followed == allowed
    assert sorted(u for u, *_ in out.links) == sorted({"http://e.com" + href for href, _ in anchors})


# Single-byte encodings as the Encoding Standard reads them: Python's codec's character for
# each byte it defines, and, in the windows code pages, the C1 control of the same value for
# each byte 0x80-0x9F it leaves unassigned (windows-1252 has no undefined byte). A browser
# writes a link's query back in the page's encoding: the bytes the page holds.
_SINGLE_BYTE = ["windows-1252", "iso-8859-1", "windows-1250", "windows-1253", "windows-1255", "windows-874", "koi8-r"]


def _standard_reading(label: str, byte: int) -> str | None:
    codec = codec_for_label(label)
    assert codec is not None
    try:
        return bytes([byte]).decode(codec)
    except UnicodeDecodeError:
        return chr(byte) if (codec == "cp874" or codec.startswith("cp125")) and 0x80 <= byte <= 0x9F else None


@given(label=st.sampled_from(_SINGLE_BYTE), data=st.data())
@example(label="windows-1252", data=None)
@settings(max_examples=300, deadline=None)
def test_a_link_on_a_single_byte_page_is_read_in_its_encoding(label, data) -> None:
    readable = [b for b in range(0x80, 0x100) if _standard_reading(label, b) is not None]
    if data is None:
        raw = bytes([0x81, 0x8D, 0x8F, 0x90, 0x9D])
    else:
        raw = bytes(data.draw(st.lists(st.sampled_from(readable), min_size=1, max_size=6)))
    chars = "".join(_standard_reading(label, b) or "" for b in raw)
    out = parse_html(
        b'<a href="/p' + raw + b"/?q=" + raw + b'.">' + raw + b"</a>", "http://e.com/", f"text/html; charset={label}"
    )
    [(url, _, anchor, _, _)] = out.links
    assert url == "http://e.com/p" + quote(chars.encode()) + "/?q=" + "".join(f"%{b:02X}" for b in raw) + "."
    assert anchor == " ".join(chars.split())


def test_the_standards_own_characters_of_single_byte_encodings() -> None:
    # windows-1255 0xCA is U+05BA; KOI8-U is KOI8-RU (0xAE ў, 0xBE Ў) to the Encoding Standard.
    out = parse_html(b'<a href="/p?q=\xca">\xca</a>', "http://e.com/", "text/html; charset=windows-1255")
    assert out.links[0][:1] == ("http://e.com/p?q=%CA",) and out.links[0][2] == "\u05ba"
    out = parse_html(b'<a href="/\xae?q=\xae\xbe">\xae\xbe</a>', "http://e.com/", "text/html; charset=koi8-u")
    assert out.links[0][0] == "http://e.com/" + quote("\u045e".encode()) + "?q=%AE%BE"
    assert out.links[0][2] == "\u045e\u040e"


@given(
    before=st.text(st.sampled_from("\x01\t\n\x0c\r \x1f"), max_size=3),
    after=st.text(st.sampled_from("\x01\t\n\r \x1f"), max_size=3),
    kept=st.sampled_from(["\u00a0", "\u3000", "\u2028", "\u0085", "\u200b", "\ufeff", "\u1680"]),
    at_start=st.booleans(),
)
@example(before="", after="", kept="\u00a0", at_start=False)
@settings(max_examples=200, deadline=None)
def test_an_href_loses_only_what_the_url_parser_strips(before, after, kept, at_start) -> None:
    # The URL parser strips leading and trailing C0 controls and spaces, nothing else: a
    # no-break space (or another Unicode space) at either end is part of the URL, in a
    # link's href as in <base href>.
    path = f"{kept}x" if at_start else f"x{kept}"
    html = f'<base href="{before}{kept}d/{after}"><a href="{before}{path}{after}">a</a>'
    out = parse_html(html.encode(), "http://e.com/")
    base = normalize(f"{kept}d/", "http://e.com/")
    assert "%" in base and [u for u, *_ in out.links] == [normalize(path, base)]


# Markup that passes one of the parse's limits (core/content/htmlbounds.py) soon after the
# page's first link: the parse stops there.
_PAST_A_LIMIT = {
    "depth": "<div>" * 600,
    "attributes": "<p " + " ".join(f"a{i}=1" for i in range(1_100)) + ">",
}
_META_FORMS = st.tuples(
    st.sampled_from(["robots", "ROBOTS", " robots ", "beamcrawl", "BeamCrawl"]),
    st.sampled_from(["nofollow", "noindex", "none", "NoFollow, max-snippet:5", "noindex nofollow"]),
    st.sampled_from(
        ['<meta name="{n}" content="{c}">', "<META content='{c}' name='{n}'/>", '<meta\tname={n} content="{c}"\n>']
    ),
)


@given(
    limit=st.sampled_from(sorted(_PAST_A_LIMIT)),
    form=_META_FORMS,
    between=st.sampled_from(["", "<p>text</p>", "<!-- c -->"]),
)
@example(limit="depth", form=("robots", "nofollow", '<meta name="{n}" content="{c}">'), between="")
@settings(max_examples=150, deadline=None)
def test_a_meta_robots_past_a_parse_limit_holds_as_at_the_top(limit, form, between) -> None:
    # The parse stops at a limit and the tree has no nodes past it: a page's <meta
    # name=robots content=nofollow> there went unread, and the links before it were followed.
    name, content, shape = form
    meta = shape.format(n=name, c=content)
    head = "<html><head><title>t</title></head><body><a href='/first'>first</a>"
    cut = parse_html((head + _PAST_A_LIMIT[limit] + between + meta).encode(), "http://e.com/")
    top = parse_html((meta + head).encode(), "http://e.com/")
    assert (cut.meta_noindex, cut.meta_nofollow) == (top.meta_noindex, top.meta_nofollow)
    assert top.meta_noindex or top.meta_nofollow


def test_a_meta_robots_past_the_parsed_bytes_holds_too(monkeypatch) -> None:
    from beamcrawl.core.content import htmlparse

    monkeypatch.setattr(htmlparse, "MAX_PARSE_BYTES", 1_000)
    page = b"<a href='/first'>first</a>" + b"<p>text</p>" * 200 + b'<meta name="robots" content="nofollow">'
    assert parse_html(page, "http://e.com/").meta_nofollow
    assert parse_html(page.decode().encode("utf-16"), "http://e.com/").meta_nofollow  # decoded as the page


@given(
    unit=st.sampled_from(["<meta ", "<meta a=", "<meta name=robots ", "<meta content='x' <meta ", "<META/"]),
    n=st.integers(200, 2_000),
)
@settings(max_examples=30, deadline=None)
def test_the_unparsed_part_is_read_in_one_pass(unit, n) -> None:
    # Each "<meta" is read to its tag's end, and the next is looked for after it: a tag
    # that never closes must not be read again from every "<meta" inside it.
    from beamcrawl.core.content import sniff

    calls = []
    real = sniff._attribute

    def counted(head: bytes, pos: int):
        calls.append(pos)
        return real(head, pos)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sniff, "_attribute", counted)
        list(sniff.meta_tags((unit * n + ">").encode()))
    assert len(calls) <= 4 * n + 2  # at most one call a "<meta", name and value


# --- anchors inside anchors ---------------------------------------------------------------------

# What makes an <a href> hold the next: an <svg>'s <a> nest as written, and markers (<object>,
# <marquee>, a cell) keep the <a> before them from being closed by the next.
_NESTERS = {
    "svg": ("<svg>", "<a href=/{i}>"),
    "object": ("", "<a href=/{i}><object>"),
    "marquee": ("", "<a href=/{i}><marquee>"),
    "cell": ("", "<table><tr><td><a href=/{i}>"),
}
_INSIDE = {
    "words": "x ",
    "letters": "x",
    "elements": "<g/>x ",
    "spaces": "y \t\n \u00a0\u3000 ",
}


def _anchors_as_read_one_by_one(page: bytes) -> list[str]:
    """Each href's anchor text, in order, as its first <a> (the parser may clone one) reads
    alone."""
    from beamcrawl.core.content.htmlparse import _squeeze, parse_document

    first: dict[str, str] = {}
    for node in parse_document(page).css("a[href]"):
        first.setdefault(node.attributes["href"] or "", _squeeze(node.text(deep=True))[:MAX_ANCHOR_CHARS])
    return list(first.values())


_PIECES = st.sampled_from(
    [
        "<svg>", "</svg>", "<a href=/{i}>", "</a>", "<object>", "</object>", "<marquee>", "<td>", "<table>",
        "<b>", "</b>", "<g/>", "<!--c-->", "<template>t</template>", "<script>s</script>", "x", "y z",
        " ", "\n\t ", "\u00a0", "\u3000", "&amp;", "w" * 90, " " * 300, "<p>", "</p>", "<br>",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=60))
def test_nested_anchors_read_as_each_anchor_alone_reads(pieces):
    # The hrefs differ, but for the <a> the parser clones: a link each, its first <a>'s text.
    from beamcrawl.core.content import htmlparse

    page = "".join(piece.format(i=i) for i, piece in enumerate(pieces)).encode()
    expected = _anchors_as_read_one_by_one(page)
    # Read one by one, and by the one walk that nested anchors are read by past a budget
    # (here none: the walk reads every page).
    for budget in (htmlparse._ANCHOR_READ, -1):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(htmlparse, "_ANCHOR_READ", budget)
            links = parse_html(page, "http://a.example/").links
        assert [anchor for _, _, anchor, _, kind in links if kind == "a"] == expected, budget


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nester=st.sampled_from(sorted(_NESTERS)),
    inside=st.sampled_from(sorted(_INSIDE)),
    depth=st.integers(150, 400),
    size=st.integers(300_000, 600_000),
)
@example(nester="svg", inside="words", depth=400, size=600_000)  # 2.1 s, where its links alone took 0.02 s
def test_nested_anchors_cost_what_the_same_anchors_side_by_side_cost(nester, inside, depth, size):
    # Each anchor's text was its whole subtree's, read again for each anchor it held: 500
    # nested anchors around 1 MB of words took 3 s. The same page whose anchors are closed
    # at once (each holds nothing) is the measure; the margin is for a loaded machine.
    opener, anchor = _NESTERS[nester]
    text = _INSIDE[inside] * (size // len(_INSIDE[inside]))
    nested = (opener + "".join(anchor.format(i=i) for i in range(depth)) + text).encode()
    side_by_side = (opener + "".join(anchor.format(i=i) + "</a>" for i in range(depth)) + text).encode()

    def cpu(page: bytes) -> float:
        started = time.process_time()
        parse_html(page, "http://a.example/")
        return time.process_time() - started

    alone = min(cpu(side_by_side) for _ in range(2))
    assert cpu(nested) < 10 * alone + 0.1


# --- the most links a page gives (max_links) ---------------------------------------------------

from unittest import mock  # noqa: E402

from beamcrawl.core.content import htmlparse  # noqa: E402
from beamcrawl.core.content.htmlparse import MAX_LINKS, PageLinks, page_links, parse_bounded  # noqa: E402


def _links(html: str, max_links: int, url: str = "http://a.example/dir/page") -> PageLinks:
    tree = parse_bounded(html.encode(), "text/html; charset=utf-8")
    return page_links(tree.tree, url, "beamcrawl", tree.encoding, tree.unparsed, max_links)


def test_a_page_of_many_distinct_links_gives_the_first_max_links_in_order():
    html = "<html><body>" + "".join(f'<a href="/p{i}">link {i}</a>' for i in range(20_000)) + "</body></html>"
    capped = _links(html, 1000)
    assert capped.capped
    assert [u for u, *_ in capped.links] == [f"http://a.example/p{i}" for i in range(1000)]
    assert [a for _, _, a, _, _ in capped.links] == [f"link {i}" for i in range(1000)]
    everything = _links(html, 0)  # 0: no cap
    assert not everything.capped and len(everything.links) == 20_000
    assert capped.links == everything.links[:1000]
    # Under the default a real page is never capped; exactly at the cap is not past it.
    assert not _links(html, MAX_LINKS * 2).capped
    assert not _links(html, 20_000).capped and _links(html, 20_000).links == everything.links
    assert _links(html, 19_999).capped


def test_a_capped_page_still_reads_its_base_meta_robots_and_title_wherever_they_are():
    links = "".join(f'<a href="p{i}">{i}</a>' for i in range(50))
    html = (
        f"<html><head></head><body>{links}<title>late</title>"
        '<base href="http://b.example/x/"><meta name="robots" content="nofollow, noindex"></body></html>'
    )
    capped, whole = _links(html, 10), _links(html, 0)
    assert capped.capped and capped.links == whole.links[:10]
    assert capped.links[0][0] == "http://b.example/x/p0"  # the <base> after them counts
    assert (capped.title, capped.meta_nofollow, capped.meta_noindex) == ("late", True, True)


_CAP_HREFS = [
    "/a",
    "/b",
    "b",
    "c/d",
    "../e?q=1",
    "#top",
    "",
    "http://o.example/f",
    "javascript:x",
    "http://[bad",
    "/a#x",
]
_CAP_PIECES = st.one_of(
    st.builds(
        lambda h, r, t: f'<a href="{h}"{r}>{t}</a>',
        st.sampled_from(_CAP_HREFS),
        st.sampled_from(["", " rel=nofollow", " rel='noopener NOFOLLOW'"]),
        st.sampled_from(["x", "", "two  words", "<b>bold</b>"]),
    ),
    st.builds(lambda h: f'<a href="{h}">', st.sampled_from(_CAP_HREFS)),  # left open: the parser clones it
    st.builds(lambda h: f'<A HREF="{h}">X</A>', st.sampled_from(_CAP_HREFS)),
    st.builds(lambda h: f'<area href="{h}">', st.sampled_from(_CAP_HREFS)),
    st.builds(lambda h: f'<link rel="canonical" href="{h}">', st.sampled_from(_CAP_HREFS)),
    st.builds(lambda h: f'<link rel="alternate" type="application/rss+xml" href="{h}">', st.sampled_from(_CAP_HREFS)),
    st.builds(lambda h: f'<link rel="stylesheet" href="{h}">', st.sampled_from(_CAP_HREFS)),
    st.builds(lambda h: f'<iframe src="{h}"></iframe>', st.sampled_from(_CAP_HREFS)),
    st.builds(lambda h: f'<meta http-equiv="refresh" content="0; url={h}">', st.sampled_from(_CAP_HREFS)),
    st.builds(lambda h: f'<base href="{h}">', st.sampled_from(["http://b.example/q/", "/r/", "file:///C:/s/"])),
    st.builds(lambda h: f'<svg><a xlink:href="{h}">s</a><a href="{h}">t</a></svg>', st.sampled_from(_CAP_HREFS)),
    st.builds(lambda h: f'<a xlink:href="{h}">not a link</a>', st.sampled_from(_CAP_HREFS)),
    st.builds(lambda h: f'<math><a href="{h}">m</a></math>', st.sampled_from(_CAP_HREFS)),
    st.builds(lambda h: f'<template><a href="{h}">t</a></template>', st.sampled_from(_CAP_HREFS)),
    st.builds(lambda h: f'<table><a href="{h}">f</a><tr><td>', st.sampled_from(_CAP_HREFS)),
    st.sampled_from(
        [
            "<b>",
            "</b>",
            "<p>",
            "<div>",
            "</div>",
            "<object>",
            "</object>",
            "text ",
            "<!-- <a href=/c> -->",
            '<meta name="robots" content="nofollow">',
            "<title>t</title>",
            "<frameset><frame src=/fr>",
        ]
    ),
)


def _edges(found: PageLinks) -> list[tuple[str, int, str, str]]:
    return [(url, fp, anchor, kind) for url, fp, anchor, _, kind in found.links]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(_CAP_PIECES, max_size=60),
    cap=st.integers(min_value=1, max_value=25),
    at_once=st.sampled_from([0, htmlparse._FOUND_AT_ONCE]),  # 0: the link elements always walked
)
def test_the_links_kept_under_a_cap_are_the_first_of_the_uncapped_parses(pieces, cap, at_once):
    html = "<html><body>" + "".join(pieces)
    whole = _links(html, 0)
    with mock.patch.object(htmlparse, "_FOUND_AT_ONCE", at_once):
        capped = _links(html, cap)
        exact = _links(html, max(len(whole.links), 1))
    assert capped.capped == (len(whole.links) > cap)
    assert _edges(capped) == _edges(whole)[:cap]
    # A target is followed if any of its links up to the cap may be; one past it is not read.
    for kept, full in zip(capped.links, whole.links):
        assert kept[3] >= full[3]
    assert (capped.title, capped.meta_noindex, capped.meta_nofollow) == (
        whole.title,
        whole.meta_noindex,
        whole.meta_nofollow,
    )
    assert capped.canonical is None or capped.canonical in {u for u, *_, k in capped.links if k == "canonical"}
    # A cap the page does not pass, its link elements read one at a time or found at once,
    # gives exactly what the uncapped parse gives, nofollow too.
    assert not exact.capped
    assert (exact.links, exact.canonical, exact.invalid_links) == (whole.links, whole.canonical, whole.invalid_links)
