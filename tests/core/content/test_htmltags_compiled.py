"""The compiled tokenizer of the parse limits' pre-scan (core/content/_htmltags.c) reads the
tags the regular expressions read, on any text, and the scan answers the same with either."""

from __future__ import annotations

import glob
import tracemalloc
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamcrawl.core.content import htmlbounds
from beamcrawl.core.content.sniff import decode_html

# Imported, not skipped when absent: make install builds it, and a build without it would
# run the expressions unseen.
from beamcrawl.core.content import _htmltags  # noqa: E402

# Every character a rule of the tokenizer treats apart (the HTML spaces, and the vertical tab
# that is none), letters of both cases, and text of one, two and four bytes a character.
_SIGNIFICANT = list("<>/=\"' \t\n\f\r\x0baZbY-1!?") + ["\u00e9", "\u4e2d", "\U0001f600"]
_PIECES = ["<a", "</b", "<P ", "</", '="', "='", "<!--", "-->", " href=", "<br/>", "<svg ", "</svg>"]
_texts = st.lists(st.sampled_from(_SIGNIFICANT + _PIECES) | st.text(max_size=3), max_size=80).map("".join)


def test_the_compiled_tokenizer_is_built_and_used() -> None:
    assert htmlbounds.COMPILED
    assert htmlbounds._tags is _htmltags.tags
    assert htmlbounds._long_attributes is _htmltags.long_attributes
    assert htmlbounds._offset_of_tag is _htmltags.tag_offset


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts)
def test_compiled_tags_are_the_expressions_tags(text: str) -> None:
    assert _htmltags.tags(text) == htmlbounds._regex_tags(text)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts, most=st.integers(-2, 12))
def test_the_first_tags_are_the_expressions_first(text: str, most: int) -> None:
    # What the walk reads of a document: one tag past the limit, not all of its tags.
    first = _htmltags.tags(text, most)
    assert first == htmlbounds._regex_tags(text, most)
    assert first == (_htmltags.tags(text) if most < 0 else _htmltags.tags(text)[:most])


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts, longer_than=st.integers(-1, 12))
def test_compiled_long_attributes_are_the_expressions(text: str, longer_than: int) -> None:
    assert _htmltags.long_attributes(text, longer_than) == htmlbounds._regex_long_attributes(text, longer_than)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_reads_the_same(text: str) -> None:
    assert _htmltags.tags(text) == htmlbounds._regex_tags(text)


def _real_documents() -> list[str]:
    paths = [p for p in sorted(glob.glob("/usr/share/doc/*/*.html")) if os.path.isfile(p)][:20]
    return [decode_html(open(p, "rb").read(), "text/html")[0] for p in paths]


def _simweb_pages(count: int) -> list[str]:
    from beamcrawl.simweb.site import SimWeb

    web = SimWeb(4, seed=4, pages_per_host=1000, port=8000, latency_scale=0)
    pages = []
    for j in range(1, 40):
        for hi in range(4):
            path = web.page_path(hi, j)
            sim = web.respond(web.names[hi], path)
            if sim.status == 200 and path.endswith(".html"):
                pages.append(sim.body.decode())
    assert len(pages) >= count
    return pages[:count]


def test_documents_read_the_same() -> None:
    # The HTML manuals of this machine (where it has them), simweb's pages and the limits' bombs.
    docs = _real_documents() + _simweb_pages(20)
    docs += ["<p><font id=1>x" * 3000, "<div>" * 5000, "<a " + " ".join(f"a{i}=x" for i in range(600)) + ">y</a>"]
    for doc in docs:
        assert _htmltags.tags(doc) == htmlbounds._regex_tags(doc)
        assert _htmltags.long_attributes(doc, 512) == htmlbounds._regex_long_attributes(doc, 512)


_SOUP_NAMES = "a b i font nobr p div li ul table tr td svg math br img select option h1 template".split()
_soup_token = st.one_of(
    st.builds(
        lambda name, attr, slash: f"<{name}{attr}{slash}>",
        st.sampled_from(_SOUP_NAMES),
        st.sampled_from(["", " id=1", " class='x'", ' title="a>b"', " a=" + "x" * 40]),
        st.sampled_from(["", "", "/"]),
    ),
    st.builds(lambda name: f"</{name}>", st.sampled_from(_SOUP_NAMES)),
    st.sampled_from(["x", " ", "<", "\u00e9"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(soup=st.lists(_soup_token, max_size=300).map("".join), few=st.sampled_from([4, 1024]))
def test_the_scan_answers_the_same_with_either(soup: str, few: int) -> None:
    # Both paths of scan (few tags: attributes only; else the walk), with a threshold low
    # enough that generated soup takes the walk too.
    held = htmlbounds._FEW_TAGS, htmlbounds._tags, htmlbounds._long_attributes
    try:
        htmlbounds._FEW_TAGS = few
        compiled = htmlbounds.scan(soup), htmlbounds.estimate(soup)
        htmlbounds._tags, htmlbounds._long_attributes = htmlbounds._regex_tags, htmlbounds._regex_long_attributes
        assert (htmlbounds.scan(soup), htmlbounds.estimate(soup)) == compiled
    finally:
        htmlbounds._FEW_TAGS, htmlbounds._tags, htmlbounds._long_attributes = held


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts, data=st.data())
def test_compiled_tag_offsets_are_the_expressions(text: str, data: st.DataObject) -> None:
    count = len(htmlbounds._regex_tags(text))
    for number in (-1, 0, 1, count, count + 1, data.draw(st.integers(-2, count + 3))):
        assert _htmltags.tag_offset(text, number) == htmlbounds._regex_offset_of_tag(text, number)


def test_compiled_tag_offsets_on_real_pages_and_a_hostile_one() -> None:
    for text in [*_real_documents()[:5], *_simweb_pages(5), "<a b>" * 50_000]:
        count = len(_htmltags.tags(text))
        for number in sorted({1, 2, count // 3, count // 2, count - 1, count, count + 1}):
            assert _htmltags.tag_offset(text, number) == htmlbounds._regex_offset_of_tag(text, number), number


def test_tag_offsets_that_disagree_are_not_used() -> None:
    assert htmlbounds._offsets_agree(_htmltags.tag_offset)
    assert not htmlbounds._offsets_agree(lambda text, n: _htmltags.tag_offset(text, n + 1))
    assert not htmlbounds._offsets_agree(lambda text, n: _htmltags.tag_offset(text, n) - (n > 1))


def test_a_tokenizer_that_disagrees_is_not_used() -> None:
    def wrong(text: str) -> list[tuple[str, str, str, str]]:
        return [(c, n.lower(), a, f) for c, n, a, f in _htmltags.tags(text)]

    assert htmlbounds._compiled_agrees(_htmltags.tags, _htmltags.long_attributes)
    assert not htmlbounds._compiled_agrees(wrong, _htmltags.long_attributes)


def test_bad_arguments_raise() -> None:
    with pytest.raises(TypeError):
        _htmltags.tags(b"<a>")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _htmltags.long_attributes(b"<a>", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _htmltags.long_attributes("<a>")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _htmltags.tag_offset(b"<a>", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _htmltags.tag_offset("<a>", "1")  # type: ignore[arg-type]


@settings(max_examples=20, deadline=None)
@given(
    name=st.from_regex(r"[a-zA-Z][a-z0-9]{1,8}", fullmatch=True),
    attributes=st.sampled_from([">", " class=x>", " href=/a>", "/>", " id='n' hidden>"]),
    text=st.sampled_from(["", "x", " "]),
    closed=st.booleans(),
    count=st.integers(5_000, 40_000),
)
def test_a_pages_repeated_names_and_attributes_are_held_once(name, attributes, text, closed, count):
    # Each tag held its own copy of its name and attributes: 4 MB of <div></div> or
    # <a href=x> held 130 to 160 bytes a tag (83 MB of tokens for the walk); ~80 now.
    unit = f"<{name}{attributes}{text}" + (f"</{name}>{text}" if closed else "")
    page = unit * count
    tracemalloc.start()
    try:
        found = _htmltags.tags(page)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found == htmlbounds._regex_tags(page)
    assert peak < 100 * len(found), peak / len(found)


def test_names_past_those_held_once_are_read_as_they_are() -> None:
    page = "".join(f"<n{i} a{i}=x>t</n{i}>" for i in range(10_000))
    assert _htmltags.tags(page) == htmlbounds._regex_tags(page)


@settings(max_examples=50, deadline=None)
@given(
    units=st.lists(
        st.sampled_from(["<a b>", "<a b>x", "</a>", "<div class=x>", "<p>", "<br>y"]), min_size=1, max_size=20
    ),
    run=st.integers(1, 60),
)
def test_a_run_of_one_tag_holds_one_tuple(units, run):
    # A tuple a tag held 72 bytes a tag of the <a b> x 400,000 bomb, 29 MB, to say one thing.
    page = "".join(unit * run for unit in units)
    found = _htmltags.tags(page)
    assert found == htmlbounds._regex_tags(page)
    # Each run's tags are one tuple (the units are one tag each, and start with it).
    assert len({id(token) for token in found}) <= len(units)


@pytest.mark.parametrize("unit", ["<a b>", "<a>", "<a href=/x>x", "<A name=1>y"])
def test_the_walks_state_is_the_open_elements_not_every_tag(unit):
    # The <a> bomb (each <a> closes the one before): an entry of the list of formatting
    # elements was kept for each of its 200,000 elements (96 bytes each) after it was closed.
    page = unit * 100_000
    tracemalloc.start()
    try:
        estimate = htmlbounds.estimate(page)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    tags = page.count("<")
    assert (estimate.elements, estimate.bound) == (100_000, None)
    assert peak < 40 * tags, peak / tags
