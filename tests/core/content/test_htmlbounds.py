"""The parse limits (beamcrawl/core/content/htmlbounds.py): the pre-scan counts at least what
Lexbor builds, and the shapes that made one page cost gigabytes or minutes are cut in bounded
memory and time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from beamcrawl.core.content import htmlbounds
from beamcrawl.core.content.htmlparse import parse_bounded, parse_html

_VOCABULARY = (
    "a b i font nobr em code p div li ul ol dd dt table tbody tr td th caption span form button select "
    "option svg math path br img h1 h2 object marquee template body html head pre"
).split()


def _depth(tree: LexborHTMLParser) -> int:
    deepest = 0
    todo = [(tree.root, 0)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        child = node.child
        while child is not None:
            if child.tag != "-text":
                todo.append((child, depth + 1))
            child = child.next
    return deepest


_token = st.one_of(
    st.builds(
        lambda name, attr, slash: f"<{name}{attr}{slash}>",
        st.sampled_from(_VOCABULARY),
        st.sampled_from(["", " id=1", " id=2", " class=x"]),
        st.sampled_from(["", "", "", "/"]),
    ),
    st.builds(lambda name: f"</{name}>", st.sampled_from(_VOCABULARY)),
    st.just("x"),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_token, max_size=150).map("".join))
def test_the_scan_counts_at_least_about_what_the_parser_builds(soup: str) -> None:
    # The limits hold only if the scan's count of elements and depth are not far below the
    # parser's. Tag soup of every misnesting the tree builder knows: tables, cells, formatting
    # elements, lists, SVG, select. (Measured on 3,000 random soups of up to 400 tags: at most
    # 1.16 x the elements and 1.64 x the depth; on 3,000 real HTML files never more.)
    tree = LexborHTMLParser(soup)
    found = htmlbounds.estimate(soup)
    assert len(tree.css("*")) <= 2 * found.elements + 8
    assert _depth(tree) <= 2 * found.depth + 8


def test_pages_within_the_limits_are_parsed_whole() -> None:
    page = (
        "<html><body>"
        + "".join(f"<p><a href=/{i}>link {i}</a> <b>bold</b></p>" for i in range(3000))
        + "</body></html>"
    )
    assert htmlbounds.scan(page) is None
    tree, truncated, _, _ = parse_bounded(page.encode())
    assert truncated is None
    assert len(tree.css("a")) == 3000


# The shapes of issue #24 and their kin, each far past a limit. Before the limits: <p><font id=N>x
# x 4,000 built ~3.4 GB, 100,000 <div> took 40-65 s, 100,000 <ul><li> 262 s, one tag of 100,000
# attributes 45 s.
_BOMBS = {
    "formatting": lambda n, fmt, block: "".join(f"<{block}><{fmt} id={i}>x" for i in range(n)),
    "nesting": lambda n, fmt, block: f"<{block}>" * n,
    "lists": lambda n, fmt, block: "<ul><li>" * n,
    "attributes": lambda n, fmt, block: f"<{fmt} " + " ".join(f"a{i}=x" for i in range(n)) + " href=/x>y</a>",
    "tables": lambda n, fmt, block: f"<table><tr><td><{fmt} id=1>" * n,
    "adoption": lambda n, fmt, block: f"<{fmt}><{block}>x" * n + f"</{fmt}>" * n,
}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(sorted(_BOMBS)),
    n=st.integers(min_value=4_000, max_value=12_000),
    fmt=st.sampled_from(["font", "b", "a", "em", "code", "nobr", "span"]),
    block=st.sampled_from(["p", "div", "li", "h1", "blockquote", "section"]),
)
def test_bombs_are_cut_and_parsed_in_bounded_time(shape: str, n: int, fmt: str, block: str) -> None:
    page = _BOMBS[shape](n, fmt, block)
    started = time.process_time()
    tree, truncated, _, _ = parse_bounded(page.encode())
    links = parse_html(page.encode(), "http://a.example/")
    spent = time.process_time() - started
    elements = len(tree.css("*"))
    assert elements <= 2 * htmlbounds.MAX_ELEMENTS + 8
    assert _depth(tree) <= 2 * htmlbounds.MAX_DEPTH + 8
    assert spent < 20  # minutes before; a bound that only an unbounded parse can pass
    # The shapes that pass a limit (a <p>, <li> or <h1> closes the one before; an <a> or a
    # <span> is no formatting element that blocks rebuild).
    nests = shape == "nesting" and block not in ("p", "li", "h1")
    rebuilds = shape == "formatting" and fmt in ("font", "b", "em", "code")
    if nests or rebuilds or shape in ("lists", "attributes"):
        assert truncated is not None
    assert links.invalid_links >= 0


# A process of its own parses generated pages, so that its peak is the parses' own: its
# harness, then a body that draws pages and hands each to measure(page), then its readout.
_PEAK_HEAD = """
import json, resource, sys, time
# A parse that is not bounded fails here, not by taking the machine's memory.
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
resource.setrlimit(resource.RLIMIT_CPU, (120, 120))
from hypothesis import given, settings, HealthCheck, strategies as st
from beamcrawl.core.content.htmlparse import parse_html
from beamcrawl.core.content.textfp import html_simhash
worst = {"cpu": 0.0}
examples = settings(max_examples=int(sys.argv[1]), deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))

def measure(page):
    started = time.process_time()
    parse_html(page.encode(), "http://a.example/")
    html_simhash(page.encode())
    worst["cpu"] = max(worst["cpu"], time.process_time() - started)
"""
_PEAK_TAIL = """
# VmHWM, this process's own peak: ru_maxrss also counts the parent's RSS at the fork (Linux
# carries the old address space's high-water mark across exec), which is pytest's own size.
with open("/proc/self/status") as status:
    hwm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"peak_mb": hwm_kb / 1024, **worst}))
"""


def _peaks(body: str, examples: int) -> dict[str, float]:
    """The peak memory (MB) and the most CPU one page took, of a process that runs ``body``
    (pages drawn ``examples`` times, each given to ``measure``) under the harness."""
    script = _PEAK_HEAD + textwrap.dedent(body) + _PEAK_TAIL
    done = subprocess.run(
        [sys.executable, "-c", script, str(examples)], capture_output=True, text=True, env=dict(os.environ), timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_BOMB_PAGES = """
    @examples
    @given(n=st.integers(3_000, 8_000), fmt=st.sampled_from(["font", "b", "i", "em", "strong", "s"]),
           block=st.sampled_from(["p", "div", "li", "h2", "blockquote"]),
           deep=st.integers(50_000, 100_000), attrs=st.integers(20_000, 60_000))
    def bombs(n, fmt, block, deep, attrs):
        measure("".join(f"<{block}><{fmt} id={i}>x" for i in range(n)))
        measure("<div>" * deep)
        measure("<ul><li>" * deep)
        measure("<a " + " ".join(f"a{i}=x" for i in range(attrs)) + ">y</a>")

    bombs()
"""


def test_bombs_parse_in_bounded_memory_and_cpu() -> None:
    # In a process of its own, so its peak is the parses' own: the formatting bomb alone
    # took ~3.4 GB, 100,000 <ul><li> 262 s of CPU, before the limits.
    peaks = _peaks(_BOMB_PAGES, 1)
    assert peaks["peak_mb"] < 400, peaks
    assert peaks["cpu"] < 20, peaks


@pytest.mark.slow
def test_bombs_parse_in_bounded_memory_and_cpu_many_examples() -> None:
    peaks = _peaks(_BOMB_PAGES, 25)
    assert peaks["peak_mb"] < 400, peaks
    assert peaks["cpu"] < 20, peaks


# --- the faster scan equals the reference (the walk as it was before it was made faster) -------

# The plain form of the walk, kept in tests/core/content/htmlbounds_reference.py: the module's
# scan must give the same answer on every input (the same cut and limit, or None), and count the
# same elements and depth.
import contextlib  # noqa: E402
import glob  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import htmlbounds_reference as reference  # noqa: E402

from beamcrawl.simweb.site import SimWeb  # noqa: E402

_NAMES = (
    _VOCABULARY
    + (
        "li dd dt dl h3 h4 hr input meta link col colgroup thead tfoot optgroup applet foreignObject desc "
        "title mi mtext annotation-xml s u big small strike strong tt address section nav xmp plaintext "
        "listing dialog acronym var my-element frameset iframe textarea label"
    ).split()
)
_ATTRIBUTE_SETS = [
    "",
    "",
    " id=1",
    " id=2",
    " class=x",
    ' href="/a"',
    ' title="a>b"',
    " title='<b>'",
    " href=x<y",
    ' a="1"b="2"',
    ' =">" x',
    " color=red",
    " FACE=x",
    " size=2",
    " /",
    " x=",
    ' x="unclosed',
    "\t\nid=3",
    " a b c d e",
    " a=1 b=2 c=3 d=4 e=5 f=6",
    ' a="" b="" c=\'\' d e',
    " a" * 9,
]
_soup_token = st.one_of(
    st.builds(
        lambda name, case, attributes, slash: f"<{case(name)}{attributes}{slash}>",
        st.sampled_from(_NAMES),
        st.sampled_from([str.lower, str.lower, str.upper, str.title]),
        st.sampled_from(_ATTRIBUTE_SETS),
        st.sampled_from(["", "", "", "/"]),
    ),
    st.builds(
        lambda name, attributes: f"</{name}{attributes}>",
        st.sampled_from(_NAMES),
        st.sampled_from(["", "", " x=1", " a b c d e"]),
    ),
    st.sampled_from(
        [
            "x",
            "x",
            " ",
            "\n",
            "a < b",
            "<3",
            "</ x>",
            "<!-- <b> -->",
            "<!DOCTYPE html>",
            "&lt;",
            ">",
            "<",
            "</",
            "<script>if (a<b) s='</p>'</script>",
            "<b",
            '<a href="',
            "<p id='",
        ]
    ),
)
# Runs of one piece: deep nesting, long lists, many rebuilds, counts near the limits.
_run = st.tuples(st.lists(_soup_token, min_size=1, max_size=8).map("".join), st.integers(1, 120)).map(
    lambda piece: piece[0] * piece[1]
)
_soup = st.lists(st.one_of(_soup_token, _soup_token, _run), max_size=80).map("".join)
# Few names and attributes, densely: the same formatting element open three times and more
# (Noah's Ark), blocks that close them and the text that rebuilds them, pairs with and without
# text, end tags where nothing is open.
_dense_token = st.one_of(
    st.builds(
        lambda name, attributes: f"<{name}{attributes}>",
        st.sampled_from("b b i code a a font nobr p p div span li h1 td tr table ul".split()),
        st.sampled_from(["", "", " id=1"]),
    ),
    st.builds(
        lambda name, attributes: f"</{name}{attributes}>",
        st.sampled_from("b i code a font nobr p div span li h1 td tr table ul".split()),
        st.sampled_from(["", "", "", " a b c d e"]),
    ),
    st.just("x"),
)
# Pieces the walk takes a short way through (an element and its end tag next to each other),
# among the shapes that make that way wrong when a condition of it is missed.
_motif = st.sampled_from(
    ["<b><b><b>", "<b>x</b>", "<b id=1>x</b>", "<p>x</p>", "<li>x</li>", "<span>x</span>", "</p>x", "<p><b>x"]
)
_dense_run = st.tuples(
    st.lists(st.one_of(_dense_token, _motif), min_size=1, max_size=3).map("".join), st.integers(1, 6)
)
_dense = st.lists(st.one_of(_dense_token, _motif, _dense_run.map(lambda piece: piece[0] * piece[1])), max_size=40).map(
    "".join
)
# Documents as people write them: elements inside elements, now and then an end tag left out.
_document = st.recursive(
    st.sampled_from(["x", "some text ", "<br>", '<img src="a.png" alt="">', "&amp;", "<hr>"]),
    lambda inner: st.builds(
        lambda name, attributes, children, closed: (
            f"<{name}{attributes}>{''.join(children)}" + (f"</{name}>" if closed else "")
        ),
        st.sampled_from(_NAMES),
        st.sampled_from(_ATTRIBUTE_SETS[:8]),
        st.lists(inner, max_size=6),
        st.sampled_from([True, True, True, False]),
    ),
    max_leaves=300,
)
# (elements, depth, attributes, tags, the "<" count under which only attributes are scanned):
# small limits put the cuts in the middle of short documents.
_limits = st.one_of(
    st.just((htmlbounds.MAX_ELEMENTS, htmlbounds.MAX_DEPTH, htmlbounds.MAX_ATTRIBUTES, htmlbounds.MAX_TAGS, 0)),
    st.tuples(
        st.sampled_from([20, 60, 150, 200_000]),
        st.sampled_from([4, 9, 30, 512]),
        st.sampled_from([1, 3, 256]),
        st.sampled_from([25, 90, 400_000]),
        st.sampled_from([0, 0, 12, 1024]),
    ),
)


@contextlib.contextmanager
def _with_limits(limits: tuple[int, int, int, int, int]) -> Iterator[None]:
    names = ("MAX_ELEMENTS", "MAX_DEPTH", "MAX_ATTRIBUTES", "MAX_TAGS", "_FEW_TAGS")
    saved = [(module, name, getattr(module, name)) for module in (htmlbounds, reference) for name in names]
    for module in (htmlbounds, reference):
        for name, value in zip(names, limits):
            setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _answer(bound: object) -> tuple[int, str] | None:
    return None if bound is None else (bound.cut, bound.reason)  # type: ignore[attr-defined]


def _assert_same_as_reference(text: str) -> None:
    # The module's walk (compiled where built: test_htmlwalk_compiled.py) is the Python one's,
    # and the scan, with either, the plain reference's.
    assert htmlbounds._walk(text) == htmlbounds._py_walk(text)
    assert _answer(htmlbounds.scan(text)) == _answer(reference.scan(text))
    new, old = htmlbounds.estimate(text), reference.estimate(text)
    assert (new.elements, new.depth, _answer(new.bound)) == (old.elements, old.depth, _answer(old.bound))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_soup, _limits)
def test_the_scan_equals_the_reference_on_tag_soup(soup: str, limits: tuple[int, int, int, int, int]) -> None:
    with _with_limits(limits):
        _assert_same_as_reference(soup)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_dense, _limits)
def test_the_scan_equals_the_reference_on_dense_formatting(soup: str, limits: tuple[int, int, int, int, int]) -> None:
    with _with_limits(limits):
        _assert_same_as_reference(soup)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_document, _limits)
def test_the_scan_equals_the_reference_on_documents(document: str, limits: tuple[int, int, int, int, int]) -> None:
    with _with_limits(limits):
        _assert_same_as_reference(f"<!DOCTYPE html><html><head><title>t</title></head><body>{document}</body></html>")


def test_the_scan_equals_the_reference_on_simweb_and_real_pages() -> None:
    web = SimWeb(20, seed=5, pages_per_host=1_000_000, port=8000, latency_scale=0)
    pages = [web.respond(web.names[i % 20], web.page_path(i % 20, 1 + i // 20)) for i in range(60)]
    texts = [page.body.decode("utf-8", "replace") for page in pages if page.status == 200]
    # Documents people wrote, where this machine has some (the bench's corpus).
    for path in sorted(glob.glob("/usr/share/doc/*/*.html"))[:40]:
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                texts.append(fh.read().decode("utf-8", "replace"))
    assert texts
    for limits in [
        (htmlbounds.MAX_ELEMENTS, htmlbounds.MAX_DEPTH, htmlbounds.MAX_ATTRIBUTES, htmlbounds.MAX_TAGS, 0),
        (400, 10, 3, 800, 0),
        (90, 6, 2, 150, 16),
    ]:
        with _with_limits(limits):
            for text in texts:
                _assert_same_as_reference(text)


@pytest.mark.parametrize(
    ("document", "limits"),
    [
        # An element and its end tag next to each other, when Noah's Ark drops an older entry
        # for it (the rebuild after </p> finds two <b>, not three).
        ("<p><b><b><b><b>x</b></p>x", None),
        ("<p><b><b><b><b id=1>x</b></p>x", None),
        # A paragraph that closes a <b>, then <p>x</p>: the text in it rebuilds the <b> first.
        ("<p><b>x<p>x</p>y", None),
        ("<li><i>x<li>x</li>y", None),
        # An end tag next to its start tag that has too many attributes.
        ("<b>x</b a b c d e>", (200_000, 512, 1, 400_000, 0)),
        ("<span></span a b c>", (200_000, 512, 1, 400_000, 0)),
        # The pair itself at the limits: the start tag is where the cut is.
        ("<div>" * 3 + "<span>x</span>", (200_000, 3, 256, 400_000, 0)),
        ("<div><span>x</span><code>y</code>", (2, 512, 256, 400_000, 0)),
        ("<div><span>x</span></div>" * 3, (200_000, 512, 256, 5, 0)),
        # A rebuild stopped by a limit after it opened some elements deeper than any before.
        ("<p><b><i>x</p><div><div><div>x", (7, 512, 256, 400_000, 0)),
        ("<p><b><i>x</p><div><div><div>x", (200_000, 4, 256, 400_000, 0)),
        # Uppercase end tags, and a start tag whose next end tag is another element's.
        ("<SPAN>x</span><Code>y</CODE><b>x</i></b>", None),
    ],
)
def test_the_scan_equals_the_reference_where_the_walk_takes_a_short_way(
    document: str, limits: tuple[int, int, int, int, int] | None
) -> None:
    real = (htmlbounds.MAX_ELEMENTS, htmlbounds.MAX_DEPTH, htmlbounds.MAX_ATTRIBUTES, htmlbounds.MAX_TAGS, 0)
    with _with_limits(limits or real):
        _assert_same_as_reference(document)


@pytest.mark.parametrize("shape", sorted(_BOMBS))
def test_the_scan_equals_the_reference_on_the_bombs(shape: str) -> None:
    _assert_same_as_reference(_BOMBS[shape](5_000, "font", "p"))
    _assert_same_as_reference(_BOMBS[shape](3_000, "a", "div"))


# --- formatting elements whose attributes the parser copies -------------------------------------

_COPIES_OF_ATTRIBUTES = """
    @examples
    @given(fmt=st.sampled_from(["a", "b", "font", "nobr", "em"]), name=st.sampled_from(["href", "class", "x"]),
           size=st.integers(200_000, 400_000), copies=st.integers(3_000, 6_000),
           block=st.sampled_from(["p", "div", "li"]))
    def copies_of_attributes(fmt, name, size, copies, block):
        open_fmt = f"<{fmt} {name}='" + "x" * size + "'>"
        # rebuilt at each block after the one that closed it
        measure(f"<{block}>" + open_fmt + f"x</{block}>" + f"<{block}>x</{block}>" * copies)
        # cloned by the adoption agency at each of its end tags after a block
        measure(open_fmt + f"<div>x</{fmt}>" * copies)

    copies_of_attributes()
"""


def test_formatting_elements_of_long_attributes_are_copied_in_bounded_memory() -> None:
    # A formatting element the parser rebuilds or adopts is created with a copy of its
    # attributes, which the walk counted as one element whatever their size: a 0.5 MB page,
    # <p><a href='...0.5 MB...'>x</p> then <p>x</p> × 4,000, held 1.9 GB, and 1 MB of them did
    # not parse in 6 GB. Each copy now counts an element for each CLONE_CHARS of attributes.
    peaks = _peaks(_COPIES_OF_ATTRIBUTES, 3)
    assert peaks["peak_mb"] < 400, peaks
    assert peaks["cpu"] < 20, peaks


_heavy_token = st.one_of(
    st.builds(
        lambda fmt, size: f"<{fmt} class='{'x' * size}'>",
        st.sampled_from(["a", "b", "font", "nobr", "i"]),
        st.sampled_from([0, 0, 511, 512, 1_100, 2_600]),
    ),
    st.sampled_from(["<p>", "</p>", "<div>", "</div>", "</a>", "</b>", "</font>", "</nobr>", "</i>", "x", "<td>"]),
    st.sampled_from(["<table>", "<object>", "</object>", "<li>", "<h1>", "</h1>"]),
)
_heavy = st.lists(_heavy_token, max_size=60).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_heavy, _limits)
def test_copies_of_long_attributes_are_counted_as_the_reference_counts_them(
    soup: str, limits: tuple[int, int, int, int, int]
) -> None:
    with _with_limits(limits):
        _assert_same_as_reference(soup)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tag=st.sampled_from(["html", "body", "BODY", "Html"]),
    per_tag=st.integers(1, 4),
    n=st.integers(3_000, 5_000),
)
def test_many_html_and_body_tags_are_parsed_in_linear_time(tag: str, per_tag: int, n: int) -> None:
    # Each <html> or <body> after the first adds the attributes its element lacks, each
    # compared with all the element's: 40,000 <body a{i}> (0.5 MB) took 5 s, 4 times as many
    # 16 times as long. Their attributes count together against MAX_ATTRIBUTES.
    cuts = []

    def cpu(count: int) -> float:
        page = "".join(f"<{tag} " + " ".join(f"a{i}-{j}" for j in range(per_tag)) + ">x" for i in range(count))
        started = time.process_time()
        cuts.append(parse_bounded(page.encode()).truncated)
        return time.process_time() - started

    assert cpu(4 * n) < 10 * min(cpu(n), cpu(n)) + 0.1
    assert cuts == ["attributes"] * 3


class _CountedSearch:
    """A compiled pattern whose searches are counted."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.searches = 0

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        self.searches += 1
        return self.pattern.search(text, pos)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1_000, 60_000), shape=st.sampled_from(["a ", "a=1 ", "a='x' ", "a\t"]))
def test_a_tag_of_many_attributes_is_counted_no_further_than_the_limit(n, shape):
    # Each tag's attributes were all counted, whatever the limit: one tag of 500,000
    # attributes took 0.33 s to answer what its first 257 tell.
    counted = _CountedSearch(htmlbounds._ATTRIBUTE)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(htmlbounds, "_ATTRIBUTE", counted)
        bound = htmlbounds.scan("<p " + shape * n + ">x</p>")
    assert bound == htmlbounds.Bound(0, "attributes") if n > htmlbounds.MAX_ATTRIBUTES else bound is None
    assert counted.searches <= 2 * (htmlbounds.MAX_ATTRIBUTES + 2)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    unit=st.sampled_from(["<a>", "<span>x</span>", "<div></div>", "<p>", "<b>x</b>", "<br>x", "<I>x</I>"]),
    limit=st.integers(500, 5_000),
    times=st.integers(2, 6),
)
def test_tags_past_the_tag_limit_are_not_read(unit, limit, times):
    # Every tag of a document was read, and held as a tuple, before the walk stopped at the
    # first past MAX_TAGS: 4 MB of <a> held ~140 MB traced (290 MB resident) to answer what
    # its first 400,001 tags tell. The answers are the reference's, which reads them all.
    text = unit * (limit * times)
    read: list[int] = []
    tags = htmlbounds._tags

    def counted(text: str, most: int = -1) -> list:
        found = tags(text, most)
        read.append(len(found))
        return found

    with _with_limits((10**9, 10**6, htmlbounds.MAX_ATTRIBUTES, limit, 0)), pytest.MonkeyPatch.context() as patch:
        patch.setattr(htmlbounds, "_tags", counted)
        _assert_same_as_reference(text)
        assert htmlbounds.scan(text) == htmlbounds.Bound(htmlbounds._offset_of_tag(text, limit + 1), "tags")
    assert read and max(read) == limit + 1
