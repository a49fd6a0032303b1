"""The cheaper Parse stage gives what the plain one gave, bit for bit: the same links (order,
normalised URLs, fingerprints, anchors, nofollow, meta robots), the same visible text and
the same 64-bit simhash, on simweb's pages and on hand-written tricky HTML.

The plain versions are kept here as references, as they were before the cheaper ones
replaced them: four selector passes for the text, one selector per question for the links,
reference resolution through the RFC 3986 regex for all but absolute and path-absolute
references, and ``simhash_features(features(text))`` for the fingerprint (itself checked
against the ``simhash`` package in ``test_textfp.py``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from beamcrawl.core.content import textfp
from beamcrawl.core.urls import urlnorm
from beamcrawl.core.content.htmlparse import (
    FEED_TYPES,
    MAX_ANCHOR_CHARS,
    PageLinks,
    page_links,
    parse_document,
    refresh_target,
    robots_directives,
)
from beamcrawl.core.urls.urlnorm import InvalidURL, fingerprint, normalize
from beamcrawl.simweb import SimWeb

# --- the references ------------------------------------------------------------------------

_CLASS_SPLIT = re.compile(r"[\s_\-]+")
_WS = re.compile(r"\s+")
_C0_OR_SPACE = "".join(map(chr, range(0x21)))  # what the URL parser strips from a reference


def _ref_is_noise_named(node) -> bool:
    attrs = node.attributes
    for name in ("class", "id"):
        value = attrs.get(name)
        if value and not textfp._NOISE_WORDS.isdisjoint(_CLASS_SPLIT.split(value.lower())):
            return True
    return False


def _ref_tree_text(tree: LexborHTMLParser) -> str:
    # The four-pass original, with one deliberate change since: the body itself is never
    # removed (css() matches it too, and a noise word in its class emptied the page).
    body = tree.body
    if body is None:
        return ""
    own = body.mem_id
    for node in body.css(", ".join(textfp._NOISE_TAGS)):
        node.remove()
    for node in body.css(
        "[hidden], [aria-hidden=true], [role=navigation], [role=banner], [role=contentinfo], "
        "[role=complementary], [role=search], [role=menu], [role=menubar], [role=dialog]"
    ):
        if node.mem_id != own:
            node.remove()
    for node in body.css("header, footer"):
        if not textfp._inside_content(node):
            node.remove()
    for node in body.css("[class], [id]"):
        if node.mem_id != own and _ref_is_noise_named(node):
            node.remove()
    return body.text(separator=" ")


def _ref_text_simhash(text: str, width: int = 2, min_features: int = 16, word_weight: int = 1) -> int | None:
    weighted = textfp.features(text, width, word_weight)
    if len(weighted) < min_features:
        return None
    return textfp.simhash_features(weighted)


def _ref_page_links(
    tree: LexborHTMLParser, url: str, token: str = "beamcrawl", encoding: str | None = None
) -> PageLinks:
    out = PageLinks()
    base = url
    base_node = tree.css_first("base[href]")
    if base_node is not None:
        href = (base_node.attributes.get("href") or "").strip(_C0_OR_SPACE)
        if href:
            try:
                base = normalize(href, url, encoding)
            except InvalidURL:
                pass
    metas = []
    for node in tree.css("meta[name]"):
        name = (node.attributes.get("name") or "").strip().lower()
        if name in ("robots", token.lower()):
            content = node.attributes.get("content") or ""
            metas.append(content if name == "robots" else f"{token}: {content}")
    out.meta_noindex, out.meta_nofollow = robots_directives(metas, token)
    title = tree.css_first("title")
    if title is not None:
        out.title = _WS.sub(" ", title.text()).strip()[:512] or None
    seen: dict[tuple[int, str], int] = {}
    for node in tree.css("a[href], area[href], link[rel][href], iframe[src], frame[src], meta[http-equiv]"):
        tag = node.tag
        attrs = node.attributes
        if tag == "meta":
            if (attrs.get("http-equiv") or "").strip().lower() != "refresh":
                continue
            kind = "refresh"
        elif tag == "link":
            rels = (attrs.get("rel") or "").lower().split()
            if "canonical" in rels:
                kind = "canonical"
            elif "alternate" in rels and (attrs.get("type") or "").strip().lower() in FEED_TYPES:
                kind = "feed"
            else:
                continue
        elif tag in ("iframe", "frame"):
            kind = "frame"
        else:
            kind = tag
        if kind == "refresh":
            href = (refresh_target(attrs.get("content") or "") or "").strip(_C0_OR_SPACE)
            if not href:
                continue
        else:
            href = (attrs.get("src" if kind == "frame" else "href") or "").strip(_C0_OR_SPACE)
        if (not href or href.startswith("#")) and base == url:
            continue  # the page itself
        if href.startswith(("javascript:", "mailto:", "tel:", "data:")):
            continue
        try:
            target = normalize("" if href.startswith("#") else href, base, encoding)
        except InvalidURL:
            out.invalid_links += 1
            continue
        fp = fingerprint(target)
        if kind == "canonical":
            out.canonical = target
        nofollow = "nofollow" in (attrs.get("rel") or "").lower().split()
        anchor = ""
        if kind == "a":
            anchor = _WS.sub(" ", node.text(deep=True)).strip()[:MAX_ANCHOR_CHARS]
        if (fp, kind) in seen:  # one edge, followed if any of its links may be
            i = seen[(fp, kind)]
            out.links[i] = (*out.links[i][:3], out.links[i][3] and nofollow, out.links[i][4])
            continue
        seen[(fp, kind)] = len(out.links)
        out.links.append((target, fp, anchor, nofollow, kind))
    return out


def _ref_resolve(ref: str, base: str) -> str:
    head = ref[:8].lower()
    if head.startswith(("http://", "https://")):
        return ref
    b = urlnorm._split_base(base)
    if ref[:1] == "/" and ref[1:2] != "/":
        return f"{b.scheme}:{ref}" if b.authority is None else f"{b.scheme}://{b.authority}{ref}"
    scheme, authority, path, query = urlnorm._URI_PARTS.match(ref).groups()
    if scheme is not None and not urlnorm._SCHEME.fullmatch(scheme):
        scheme, authority, path, query = urlnorm._URI_PARTS.match(f"./{ref}").groups()
    if scheme is not None and (scheme.lower() != b.scheme or authority is not None):
        return ref
    if authority is not None:
        target = f"{b.scheme}://{authority}{path}"
    else:
        if not path:
            path = b.path
            if query is None:
                query = b.query
        elif path[0] != "/":
            if b.authority is not None and not b.path:
                path = f"/{path}"
            else:
                path = b.path[: b.path.rfind("/") + 1] + path
        prefix = f"{b.scheme}:" if b.authority is None else f"{b.scheme}://{b.authority}"
        target = prefix + path
    return target if query is None else f"{target}?{query}"


# --- the corpus ----------------------------------------------------------------------------

_WORDS = "alpha beta gamma delta epsilon zeta theta iota kappa lambda sigma omega".split()
_LONG = " ".join(f"{_WORDS[i % len(_WORDS)]}{i % 7}x {_WORDS[(3 * i) % len(_WORDS)]}" for i in range(40))

TRICKY: list[tuple[str, bytes]] = [
    (
        "nested noise",
        f"""<html><body><nav><aside><form><p>in form</p><script>var x;</script></form></aside>
        <div hidden><nav hidden>twice</nav></div></nav><noscript><script>inner</script>js</noscript>
        <div hidden aria-hidden="true" role="navigation">three selectors</div>
        <div class="sidebar" id="nav-main"><header>header in sidebar</header><p>side</p></div>
        <main><p>{_LONG}</p></main><template><p>tpl</p></template>
        <svg><title>svg title</title><text>svg text</text></svg><math><mi>x</mi></math></body></html>""".encode(),
    ),
    (
        "header and footer inside article and main",
        f"""<html><body><header>Site header</header><section><header>section header</header></section>
        <article><header class="byline">By someone</header><p>{_LONG}</p>
        <footer class="site-footer">noise-named footer in article</footer><footer>notes</footer></article>
        <main><div><footer>deep footer in main</footer></div></main>
        <article class="ad"><header>header of an ad article</header></article>
        <div role="main"><footer>role main is not main</footer></div><footer>Page footer</footer></body></html>""".encode(),
    ),
    (
        "class and id words",
        f"""<html><body><div class="shadow-box">shadow kept</div><div class="subheader">kept</div>
        <div class="Main-NAV">nav caps</div><div id="cookie_banner">cookies</div>
        <div class="a\u00a0nav">nbsp nav</div><div class="x\u2003menu">em space menu</div>
        <div class="\u200bnav">zero width space is no space</div><div class="ad--slot">double dash</div>
        <div class="--">only dashes</div><div class="">empty</div><div class>valueless</div>
        <p>{_LONG}</p></body></html>""".encode(),
    ),
    (
        "roles",
        f"""<html><body><div role="navigation">nav role</div><div role="NAVIGATION">caps role</div>
        <div role="navigation banner">two roles</div><div role="">empty role</div><div role>bare role</div>
        <div role="main"><p>{_LONG}</p></div><span role="search" class="x">search</span>
        <div aria-hidden="false">not hidden</div><div aria-hidden="TRUE">caps true</div><p hidden="">hidden</p>
        </body></html>""".encode(),
    ),
    ("body with a noise class", f'<html><body class="home has-sidebar"><p>{_LONG}</p></body></html>'.encode()),
    ("hidden body", f"<html><body hidden><p>{_LONG}</p></body></html>".encode()),
    (
        "non-ASCII text",
        """<html><body><p>Caf\u00e9 cr\u00e8me na\u00efve \u00fcber Stra\u00dfe GROSSE \u1e9eTRASSE \u0130stanbul
        \u0130STANBUL \u212aelvin \u212a\u212a \u039f\u0394\u039f\u03a3. \u039f\u0394\u039f\u03a3.\u0391\u0392\u0393 \u0391\u03a3'\u0391 \u03a3\u039f\u03a6\u0399\u0391\u03a3' \u03a3\u03a3
        \u4e2d\u6587\u5b57 \u65e5\u672c\u8a9e\u306e\u6587\u7ae0 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0663\u0664 x\u00b2\u00b3 \u00b2\u00b3 \u2460\u2461
        \u201cquoted\u201d it\u2019s \u2014 dash\u2026 emoji \U0001f600\U0001f600 zw\u200djoin co\u00f6perate
        fi\ufb01ligature \u2167 roman \u00bd half caf\u0065\u0301 combining</p>
        <p>""".encode()
        + _LONG.encode()
        + b"</p></body></html>",
    ),
    (
        "numbers and stop words",
        b"<html><body><p>The 2024 report of the 10:42 train at 3.14 and 1,000,000 a b c d e "
        b"x1 1x 12ab ab12 a_b _ __ 007 0x1F 1e10 about above after again against all am an and "
        + _LONG.encode()
        + b"</p></body></html>",
    ),
    ("tiny text", b"<html><body><p>Loading, please wait</p></body></html>"),
    ("app shell", b"<html><body><p>You need to enable JavaScript to run this app.</p></body></html>"),
    ("one word", b"<html><body><p>Hello</p></body></html>"),
    ("one word twice", b"<html><body><p>Hello hello</p></body></html>"),
    ("near the feature floor", b"<html><body><p>one two three four five six seven eight nine</p></body></html>"),
    ("repeated text", ("<html><body><p>" + "spam eggs " * 300 + "</p></body></html>").encode()),
    ("no body", b"<html><head><title>t</title></head></html>"),
    ("empty", b""),
    (
        "links",
        b"""<html><head><title>  Links \t page </title><base href="sub/dir/"><link rel="canonical" href="/c1">
        <link rel="alternate" type="application/rss+xml" href="/feed.xml"><link rel="alternate" href="/other">
        <meta name="ROBOTS" content="noindex"><meta name="beamcrawl" content="nofollow"><meta name="other" content="noindex">
        </head><body><a href="rel.html">Rel <b>bold</b></a><a href="rel.html">rel again</a>
        <a HREF="../up.html#frag">Up</a><a href="/root.html" rel="NoFollow noopener">Root</a>
        <a href="http://Other.ORG:80/x?utm_source=a&amp;b=1#f">Other</a><a href="//proto.rel/x">proto</a>
        <a href="?q=1">query only</a><a href="">empty</a><a href=" ">space</a><a href="#top">top</a>
        <a href="mailto:a@b.c">m</a><a href="javascript:void(0)">j</a><a href="tel:1">t</a><a href="data:x">d</a>
        <a href="http://[bad">bad</a><a href="http://[bad">bad again</a><a href="a b:c">colon path</a>
        <a href="http:g">http colon</a><a href="ftp://x/y">ftp</a><a href="HTTP://EXAMPLE.COM/A/./B/../C">caps</a>
        <a href="x?y#z?w">frag q</a><a href="caf\xc3\xa9/\xc3\xbc.html">utf8</a><a href="%7euser/%41">esc</a>
        <area href="map.html"><iframe src="frame.html"></iframe><frame src="f2.html"><link rel="canonical" href="/c2">
        <a href="/root.html">root again, followed</a><a>no href</a><svg><a href="/svg-a">s</a></svg>
        <base href="http://late.example/"></body></html>""",
    ),
    ("bad base", b'<html><head><base href="http://[bad/"></head><body><a href="x.html">x</a></body></html>'),
    (
        "base on another host",
        b'<html><head><base href="https://cdn.example.net/a/b?q"></head><body><a href="x.html">x</a><a href="">self</a></body></html>',
    ),
    (
        "links inside chrome",
        b"<html><body><nav><a href='/nav1'>n</a></nav><header><a href='/h'>h</a></header><main><p>"
        + _LONG.encode()
        + b"</p><a href='/in'>in</a></main><footer><a href='/f'>f</a></footer></body></html>",
    ),
    ("broken markup", b"<html><body><p>unclosed <div class='nav'><a href='/x'>x<p>" + _LONG.encode() + b"<footer>f"),
    (
        "latin-1 by meta",
        b'<html><head><meta charset="latin-1"></head><body><p>na\xefve caf\xe9 '
        + _LONG.encode()
        + b"</p></body></html>",
    ),
]


def _simweb_corpus() -> list[tuple[str, str, bytes]]:
    web = SimWeb(48, seed=7, pages_per_host=12, copy_hosts_from=0)
    out = []
    for hi in range(web.hosts):
        for j in range(12):
            if web.page_kind(hi, j) == "pdf":
                continue
            url = f"{web.origin(hi)}{web.page_path(hi, j)}"
            out.append((f"simweb {hi}/{j}", url, web.page_body(hi, j)))
    return out


CORPUS = [(name, "http://www.example.com/a/b/page.html?x=1", body) for name, body in TRICKY] + _simweb_corpus()


def test_the_corpus_is_varied():
    web = SimWeb(48, seed=7, pages_per_host=12, copy_hosts_from=0)
    assert {web.host(hi).role for hi in range(web.hosts)} >= {"template", "near"}
    assert len(CORPUS) > 400


@pytest.mark.parametrize("name, url, body", CORPUS, ids=[name for name, _, _ in CORPUS])
def test_links_text_and_simhash_are_those_of_the_plain_stage(name, url, body):
    fast_tree, plain_tree = parse_document(body), parse_document(body)
    assert page_links(fast_tree, url) == _ref_page_links(plain_tree, url)
    text = textfp.tree_text(fast_tree)
    assert text == _ref_tree_text(plain_tree)
    assert textfp.text_simhash(text) == _ref_text_simhash(text)
    for width, word_weight in ((1, 1), (3, 1), (2, 3)):
        assert textfp.text_simhash(text, width, 16, word_weight) == _ref_text_simhash(text, width, 16, word_weight)
    assert textfp.text_simhash(text, min_features=0) == _ref_text_simhash(text, min_features=0)


def test_parse_fetch_gives_the_plain_stage_links_and_simhash():
    from beamcrawl.schemas.records import FetchResult, FrontierEntry
    from beamcrawl.transforms.parse import parse_fetch  # imports Beam: only here

    url = "http://a.test/page"
    entry = FrontierEntry(url=url, fp=fingerprint(url), host="a.test", due_ms=0)
    headers = [("Content-Type", "text/html; charset=utf-8")]
    for name, _url, body in CORPUS[::3]:
        result = FetchResult(
            entry=entry,
            outcome="fetched",
            url=url,
            final_url=url,
            status=200,
            response_headers=headers,
            body=body,
            raw_body=body,
        )
        page = parse_fetch(result, "beamcrawl")
        if page.body_kind not in ("html", "xhtml"):
            continue
        tree = parse_document(body, "text/html; charset=utf-8")
        plain = _ref_page_links(tree, url)
        assert [(l.url, l.fp, l.anchor, l.nofollow, l.kind) for l in page.links] == plain.links, name
        assert (page.canonical, page.title) == (plain.canonical, plain.title), name
        assert page.simhash == textfp.simhash_hex(_ref_text_simhash(_ref_tree_text(tree))), name


def test_the_text_keeps_its_content_in_the_tricky_pages():
    # Identity alone could hide two equally wrong versions: spot-check what the text holds.
    texts = {name: textfp.visible_text(body) for name, body in TRICKY}
    assert "By someone" in texts["header and footer inside article and main"]
    assert "notes" in texts["header and footer inside article and main"]
    assert "deep footer in main" in texts["header and footer inside article and main"]
    assert "Site header" not in texts["header and footer inside article and main"]
    assert "noise-named footer" not in texts["header and footer inside article and main"]
    assert "role main is not main" not in texts["header and footer inside article and main"]
    for dropped in ("in form", "twice", "three selectors", "header in sidebar", "tpl", "svg"):
        assert dropped not in texts["nested noise"], dropped
    kept = texts["class and id words"]
    assert "shadow kept" in kept and "zero width space" in kept and "only dashes" in kept
    for dropped in ("nav caps", "cookies", "nbsp nav", "em space menu", "double dash"):
        assert dropped not in kept, dropped


# --- the pieces, on generated input ------------------------------------------------------------

_TRICKY_CHARS = list(
    "ab xyzAZ09_-.,'\u00e9\u00c9\u0663\u00b2\u4e2d\u00df\u1e9e\u0130\u212a\u03a3\u03c3\u00a0\u2003\u200b\u2019\ufb01\u0301"
)
texts = st.text(alphabet=st.sampled_from(_TRICKY_CHARS) | st.characters(), max_size=80)
wordy = st.lists(
    st.sampled_from(
        [
            "the",
            "a",
            "and",
            "alpha",
            "Beta",
            "GAMMA",
            "2024",
            "x1",
            "caf\u00e9",
            "\u03a3\u039f\u03a3",
            "\u4e2d\u6587",
            "\u00b2\u00b3",
            "_",
            "it\u2019s",
            "\u0130i",
            ".",
            ",",
            "\n",
        ]
    ),
    max_size=60,
).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_utf8_words_are_the_tokens(text):
    assert textfp._utf8_words(text) == [t.encode("utf-8") for t in textfp.tokens(text)]


def test_utf8_words_lower_the_whole_text_first():
    # A capital sigma lowers to a final sigma unless a letter follows, across "." or "'":
    # lowering chunk by chunk would end these words with the wrong sigma.
    for text in (
        "\u039f\u0394\u039f\u03a3.\u0391\u0392\u0393",
        "\u0391\u03a3'\u0391",
        "\u039f\u0394\u039f\u03a3. \u0391",
    ):
        assert textfp._utf8_words(text) == [t.encode("utf-8") for t in textfp.tokens(text)]
    assert textfp._utf8_words("\u0391\u03a3'\u0391") == ["\u03b1\u03c3".encode()]


def test_utf8_words_keep_lone_surrogates_out():
    text = "caf\u00e9 \ud800bad ok\udfff fine words"
    assert textfp._utf8_words(text) == [t.encode("utf-8") for t in textfp.tokens(text)]


@settings(max_examples=300, deadline=None)
@given(wordy | texts, st.integers(0, 4), st.integers(-1, 20), st.integers(1, 3))
def test_text_simhash_is_the_plain_recipe(text, width, min_features, word_weight):
    fast = textfp.text_simhash(text, width, min_features, word_weight)
    assert fast == _ref_text_simhash(text, width, min_features, word_weight)


@pytest.mark.parametrize("n", [1, 2, 254, 255, 256, 510, 511, 1000])
def test_bit_counts_are_the_column_sums_of_the_bit_matrix(n):
    rng = np.random.default_rng(n)
    digests = rng.integers(0, 256, size=16 * n, dtype=np.uint8).tobytes()
    hashes = np.frombuffer(digests, dtype="<u8")[::2]
    expected = [int(((hashes >> np.uint64(b)) & np.uint64(1)).sum()) for b in range(64)]
    assert textfp._bit_counts(digests, n).tolist() == expected
    ones = np.frombuffer(b"\xff" * 16 * n, dtype=np.uint8).tobytes()  # every bit set: the worst case for carries
    assert textfp._bit_counts(ones, n).tolist() == [n] * 64


class_values = st.lists(
    st.sampled_from(list("navmeuhdr -_\u00a0\u2003\u200b\u212aNAV\u0130") + ["nav", "menu", "ad", "header", "sidebar"]),
    max_size=12,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(class_values, class_values)
def test_noise_names_are_read_as_the_regex_split_read_them(cls, ident):
    escape = {"&": "&amp;", '"': "&quot;", "<": "&lt;"}
    attr = lambda v: "".join(escape.get(c, c) for c in v)  # noqa: E731
    node = LexborHTMLParser(f'<div class="{attr(cls)}" id="{attr(ident)}">x</div>').css_first("div")
    assert textfp._is_noise_named(node) == _ref_is_noise_named(node)


refs = st.lists(
    st.sampled_from(list("ab/.?#:%@ \t") + ["..", "http:", "https://", "//", "x.html", "\u00e9", "a b:c"]), max_size=12
).map("".join)
bases = st.sampled_from(
    [
        "http://example.com",
        "http://example.com/",
        "http://example.com/a/b/c.html?q=1#f",
        "https://Ex.com:8443/dir/",
        "http://h/a/b",
        "http:/no/authority",
        "http:opaque",
        "http://example.com?x",
        "HTTP://e.com/p;x/q",
    ]
)


@settings(max_examples=1000, deadline=None)
@given(refs, bases)
def test_reference_resolution_is_the_plain_one(ref, base):
    ref = urlnorm._clean(ref)
    assert urlnorm._resolve(ref, base) == _ref_resolve(ref, base)


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("ab \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u1680\u2000\u2028\u200b\u3000\ufeff"))
        | st.characters()
    )
)
def test_squeezed_text_is_the_regex_one(text):
    from beamcrawl.core.content.htmlparse import _squeeze

    assert _squeeze(text) == _WS.sub(" ", text).strip()


def test_str_split_cuts_at_the_whitespace_of_the_regex():
    for code in range(0x3001):  # U+3000 is the last whitespace character
        char = chr(code)
        assert (_WS.fullmatch(char) is not None) == char.isspace() == (char.split() == []), hex(code)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_fingerprint_of_a_str_is_that_of_its_utf8(url):
    import mmh3

    try:
        expected = mmh3.hash64(url.encode("utf-8"), seed=0, x64arch=True, signed=False)[0]
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            fingerprint(url)
        return
    assert fingerprint(url) == expected
