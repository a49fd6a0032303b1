"""The compiled walk of the parse limits' pre-scan (``walk`` of core/content/_htmltags.c) answers
what the walk in Python (:func:`htmlbounds._py_walk`) answers, on any input and under any limits:
the same cut and limit, the same elements and depth. The tests of test_htmlbounds.py hold the
module's scan, the compiled walk then, to the plain reference walk, and on their generators (tag
soup, dense formatting, documents, simweb and real pages) the compiled walk to the Python one
too; these compare the two walks directly on more (names Python lowers apart from ASCII, SVG
and MathML, tables, the bombs), and check the import check and the fallback."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_htmlbounds import _BOMBS, _limits, _soup, _with_limits

from beamcrawl.core.content import htmlbounds

# Imported, not skipped when absent: make install builds it, and a build without it would
# run the Python walk unseen.
from beamcrawl.core.content import _htmltags  # noqa: E402

_TABLES = htmlbounds._walk_tables(_htmltags.WALK_NAMES, _htmltags.WALK_SETS)


def _compiled(text: str) -> tuple[Any, int, int]:
    return htmlbounds._compiled_walk_by(_htmltags.walk, _TABLES, text)


def _assert_same_walk(text: str) -> None:
    assert _compiled(text) == htmlbounds._py_walk(text)


def test_the_compiled_walk_is_built_and_used() -> None:
    assert htmlbounds.WALK_COMPILED
    assert htmlbounds._walk is not htmlbounds._py_walk
    text = "<p><b>x" * 3
    assert htmlbounds._walk(text) == htmlbounds._py_walk(text) == (None, 9, 4)


# Names Python lowers apart from ASCII (the Kelvin sign lowers to "k", a dotted capital I to two
# characters), names that differ only in case, SVG and MathML with their integration points
# and the HTML tags that end them, and every part of a table.
_FOREIGN_NAMES = (
    "svg math g path mi mo mtext annotation-xml foreignObject desc title font b p div table tr td th "
    "caption tbody colgroup col template object select option li a nobr br img span"
).split()
_ODD_NAMES = [
    "b\u0130",
    "B\u0130",
    "lin\u212a",
    "LIN\u212a",
    "\u212a",
    "k\u212a",
    "a\u00e9",
    "A\u00c9",
    "Span",
    "TABLE",
]
_FOREIGN_ATTRIBUTES = ["", "", " color=red", " FACE=x", " s\u0130ze=2", " si\u212ae", " /", " id=1"]
_foreign_token = st.one_of(
    st.builds(
        lambda name, attributes, slash: f"<{name}{attributes}{slash}>",
        st.sampled_from(_FOREIGN_NAMES + _ODD_NAMES),
        st.sampled_from(_FOREIGN_ATTRIBUTES),
        st.sampled_from(["", "", "/"]),
    ),
    st.builds(lambda name: f"</{name}>", st.sampled_from(_FOREIGN_NAMES + _ODD_NAMES + ["k", "link", "spa\u212a"])),
    st.sampled_from(["x", " ", "\u00e9", "<"]),
)
_foreign_run = st.tuples(st.lists(_foreign_token, min_size=1, max_size=6).map("".join), st.integers(1, 40)).map(
    lambda piece: piece[0] * piece[1]
)
_foreign = st.lists(st.one_of(_foreign_token, _foreign_token, _foreign_run), max_size=60).map("".join)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_foreign, _limits)
def test_the_walks_agree_on_foreign_content_tables_and_odd_names(
    soup: str, limits: tuple[int, int, int, int, int]
) -> None:
    with _with_limits(limits):
        _assert_same_walk(soup)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_soup, _limits)
def test_the_walks_agree_on_the_expressions_tokens(soup: str, limits: tuple[int, int, int, int, int]) -> None:
    # The compiled walk takes the tokens of whichever tokenizer is in use.
    held = htmlbounds._tags
    try:
        htmlbounds._tags = htmlbounds._regex_tags
        with _with_limits(limits):
            _assert_same_walk(soup)
    finally:
        htmlbounds._tags = held


@pytest.mark.parametrize("shape", sorted(_BOMBS))
@pytest.mark.parametrize(
    "limits",
    [
        None,
        (1_000, 40, 8, 3_000, 0),
        (200_000, 512, 256, 9_000, 0),
    ],
)
def test_the_walks_agree_on_the_bombs(shape: str, limits: tuple[int, int, int, int, int] | None) -> None:
    real = (htmlbounds.MAX_ELEMENTS, htmlbounds.MAX_DEPTH, htmlbounds.MAX_ATTRIBUTES, htmlbounds.MAX_TAGS, 0)
    with _with_limits(limits or real):
        for fmt, block in (("font", "p"), ("a", "div"), ("nobr", "li"), ("b", "h1")):
            _assert_same_walk(_BOMBS[shape](5_000, fmt, block))


def test_the_walks_agree_on_the_hostile_pages() -> None:
    for page in (
        "<a b>" * 50_000,
        "<b><div>x" * 3_000 + "</b>" * 3_000,
        "<table><tr><td><b id=1>" * 3_000,
        "<div><object><b>x</div>" * 3_000,
        "<svg><g>" * 600 + "<b>x",
        "<b id=1>x" * 20_000 + "<p>x",
    ):
        _assert_same_walk(page)


def test_the_limits_are_read_when_the_walk_runs() -> None:
    text = "<div>" * 20
    assert htmlbounds._walk(text)[0] is None
    with _with_limits((200_000, 10, 256, 400_000, 0)):
        assert htmlbounds._walk(text) == htmlbounds._py_walk(text) == (htmlbounds.Bound(50, "depth"), 11, 10)
    with _with_limits((200_000, 512, 256, 7, 0)):
        assert htmlbounds._walk(text)[0] == htmlbounds.Bound(35, "tags")


def test_limits_the_compiled_walk_does_not_take_are_walked_in_python() -> None:
    # Negative limits, and limits past a C long long, are nobody's; the answer is Python's.
    text = "<div><b>x" * 30
    for limits in [(-1, 512, 256, 400_000, 0), (200_000, 512, 256, 10**30, 0), (10**30, 10**30, 10**30, 10**30, 0)]:
        with _with_limits(limits):
            assert htmlbounds._walk(text) == htmlbounds._py_walk(text)


def test_a_walk_that_disagrees_is_not_used() -> None:
    def deeper(*args: Any) -> tuple[int, str | None, int, int]:
        tag, reason, created, deepest = _htmltags.walk(*args)
        return tag, reason, created, deepest + (deepest > 40)

    def failing(*args: Any) -> tuple[int, str | None, int, int]:
        raise RuntimeError("no")

    assert htmlbounds._walk_agrees(_htmltags.walk, _TABLES)
    assert not htmlbounds._walk_agrees(deeper, _TABLES)
    assert not htmlbounds._walk_agrees(failing, _TABLES)
    # The sets the flags are made of are this module's: a walk given others disagrees.
    ids, names, flags = _TABLES
    no_markers = tuple(flag & ~(1 << _htmltags.WALK_SETS.index("_MARKERS")) for flag in flags)
    assert not htmlbounds._walk_agrees(_htmltags.walk, (ids, names, no_markers))
    # The check leaves the limits as they were.
    assert (htmlbounds.MAX_ELEMENTS, htmlbounds.MAX_DEPTH, htmlbounds.MAX_TAGS) == (200_000, 512, 400_000)


def test_without_the_extension_the_walk_is_pythons() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["beamcrawl.core.content._htmltags"] = None  # as if it was not built
        from beamcrawl.core.content import htmlbounds
        assert not htmlbounds.COMPILED and not htmlbounds.WALK_COMPILED
        assert htmlbounds._walk is htmlbounds._py_walk
        page = "<p><font id=1>x" * 50_000
        print(htmlbounds.scan(page), htmlbounds.estimate("<p><b>x" * 3))
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    page = "<p><font id=1>x" * 50_000
    assert out.stdout.strip() == f"{htmlbounds.scan(page)} {htmlbounds.estimate('<p><b>x' * 3)}"


def _args(tokens: Any = None, **changes: Any) -> list[Any]:
    ids, names, flags = _TABLES
    args = {
        "tokens": [("", "b", ">", "x")] if tokens is None else tokens,
        "following": False,
        "ids": ids,
        "names": names,
        "flags": flags,
        "max_elements": 10,
        "max_depth": 10,
        "max_attributes": 10,
        "max_tags": 10,
        "attribute_count": htmlbounds._attribute_count,
    }
    args.update(changes)
    return list(args.values())


def test_bad_arguments_raise() -> None:
    assert _htmltags.walk(*_args()) == (0, None, 1, 1)
    for tokens in ([("", "b", ">")], [["", "b", ">", "x"]], [("", b"b", ">", "x")], [None], ("", "b", ">", "x")):
        with pytest.raises(TypeError):
            _htmltags.walk(*_args(tokens))
    with pytest.raises(TypeError):
        _htmltags.walk(*_args(ids=list(_TABLES[0])))
    with pytest.raises(TypeError):
        _htmltags.walk(*_args(attribute_count=None))
    with pytest.raises(ValueError):
        _htmltags.walk(*_args(max_depth=-1))
    with pytest.raises(ValueError):
        _htmltags.walk(*_args(names=_TABLES[1][1:] + _TABLES[1][:1]))
    with pytest.raises(ValueError):
        _htmltags.walk(*_args(flags=_TABLES[2][:-1]))
    with pytest.raises(ValueError):
        _htmltags.walk(*_args(flags=("x",) + _TABLES[2][1:]))
    with pytest.raises(TypeError):
        _htmltags.walk(*_args()[:-1])

    def boom(attributes: str) -> int:
        raise KeyError(attributes)

    with pytest.raises(KeyError):
        _htmltags.walk(*_args([("", "b", " a" * 20 + ">", "")], attribute_count=boom, max_attributes=2))
    # An answer that is no int, and a token list changed while the walk runs: an error or the
    # walk of the tokens it started with, never a crash.
    with pytest.raises(TypeError):
        _htmltags.walk(*_args([("", "b", " a" * 20 + ">", "")], attribute_count=lambda a: "x", max_attributes=2))
    tokens = [("", "b", " a" * 20 + ">", "")] * 3

    def clears(attributes: str) -> int:
        tokens.clear()
        return 1

    assert _htmltags.walk(*_args(tokens, attribute_count=clears, max_attributes=2)) == (0, None, 3, 3)
