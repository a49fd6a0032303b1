"""The compiled simhash (core/content/_simhash.c) gives the Python path's bits on any words."""

from __future__ import annotations

import mmh3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.content import textfp

# Imported, not skipped when absent: make install builds it, and a build without it would
# run the Python path unseen.
from beamcrawl.core.content import _simhash  # noqa: E402

words_lists = st.lists(st.binary(min_size=0, max_size=40), max_size=60)


def test_the_compiled_simhash_is_built_and_used():
    assert textfp.COMPILED
    assert textfp._compiled_simhash is _simhash.simhash


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=100))
def test_feature_hash_is_mmh3s_first_word(data):
    assert _simhash.feature_hash(data) == mmh3.hash64(data, seed=0, x64arch=True, signed=False)[0]


@settings(max_examples=400, deadline=None)
@given(words=words_lists, width=st.integers(1, 5), weight=st.integers(1, 6) | st.integers(120, 600))
def test_compiled_is_the_python_path(words, width, weight):
    assert _simhash.simhash(words, width, weight) == textfp._words_simhash(words, width, weight)


@settings(max_examples=100, deadline=None)
@given(words=st.lists(st.sampled_from([b"near", b"copies", b"x" * 16, b"y" * 17, b"\xc3\xa9t\xc3\xa9"]), max_size=300))
def test_compiled_on_repeated_words(words):
    # Many occurrences of few features: the counts and the half-way comparison at their edge.
    for width in (1, 2, 3):
        assert _simhash.simhash(words, width, 1) == textfp._words_simhash(words, width, 1)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=400), width=st.integers(1, 4), weight=st.integers(1, 3))
def test_text_simhash_is_the_same_with_and_without_it(text, width, weight):
    compiled = textfp.text_simhash(text, width, 4, weight)
    held, textfp._compiled_simhash = textfp._compiled_simhash, None
    try:
        assert textfp.text_simhash(text, width, 4, weight) == compiled
    finally:
        textfp._compiled_simhash = held


def test_bad_arguments_raise():
    with pytest.raises(TypeError):
        _simhash.simhash([b"a", "b"], 2, 1)
    with pytest.raises(TypeError):
        _simhash.simhash((b"a", b"b"), 2, 1)
    with pytest.raises(ValueError):
        _simhash.simhash([b"a"], 2, 0)
    with pytest.raises(ValueError):
        _simhash.simhash([b"a"], 2, 2**31)
    assert _simhash.simhash([b"a"], 2, 2**31 - 1) == _simhash.simhash([b"a"], 2, 1)
    with pytest.raises(TypeError):
        _simhash.feature_hash("text")


def test_an_implementation_that_disagrees_is_not_used():
    assert textfp._compiled_agrees(_simhash.simhash)
    assert not textfp._compiled_agrees(lambda words, width, weight: 0)
    assert not textfp._compiled_agrees(lambda words, width, weight: _simhash.simhash(words, width + 1, weight))


def test_a_weight_past_the_compiled_counts_goes_to_python():
    # A stand-in for the Python path records that it ran: the compiled module refuses such a
    # weight (its counts are 64-bit), and text_simhash must not pass it on.
    held = textfp._words_simhash
    seen = []
    textfp._words_simhash = lambda words, width, weight: seen.append(weight) or 0
    try:
        textfp.text_simhash(" ".join(f"word{i}x" for i in range(40)), 2, 16, 2**31)
    finally:
        textfp._words_simhash = held
    assert seen == [2**31]


# --- a text's words, split and filtered in C (split_words) ----------------------------------

_chunks = st.lists(
    st.sampled_from([b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x00", b"\x80", b"\xff", b"_"])
    | st.sampled_from([b"the", b"a", b"s", b"ll", b"x", b"7", b"2024", b"0x1", b"near", b"copies", b"caf\xc3\xa9"])
    | st.binary(max_size=6),
    max_size=60,
).map(b"".join)


def test_the_compiled_split_is_used():
    assert textfp._compiled_split is _simhash.split_words


@settings(max_examples=500, deadline=None)
@given(data=_chunks)
def test_split_words_are_the_python_split(data):
    assert _simhash.split_words(data, textfp._STOP_UTF8) == textfp._split_words(data, textfp._STOP_UTF8)


@settings(max_examples=300, deadline=None)
@given(data=_chunks, stop=st.frozensets(st.binary(max_size=4), max_size=40))
def test_split_words_take_any_stop_words(data, stop):
    # The table of stop words is rebuilt for each set passed (and kept while the same one is).
    assert _simhash.split_words(data, stop) == textfp._split_words(data, stop)
    assert _simhash.split_words(data, textfp._STOP_UTF8) == textfp._split_words(data, textfp._STOP_UTF8)


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(max_size=400)
    | st.text(st.characters(max_codepoint=0x7F), max_size=400)
    # Mostly ASCII words with a few of other scripts: their chunks spliced in one by one.
    | st.lists(
        st.sampled_from(["the", "near", "copies", "x1", "42", "caf\u00e9", "don\u2019t", "\u4e2d\u6587"]), max_size=120
    ).map(" ".join)
)
def test_text_words_are_the_same_with_and_without_it(text):
    compiled = textfp._utf8_words(text)
    held, textfp._compiled_split = textfp._compiled_split, None
    try:
        assert textfp._utf8_words(text) == compiled
    finally:
        textfp._compiled_split = held
    assert compiled == [t.encode("utf-8") for t in textfp.tokens(text)]


def test_split_words_bad_arguments_raise():
    with pytest.raises(TypeError):
        _simhash.split_words("text", textfp._STOP_UTF8)
    with pytest.raises(TypeError):
        _simhash.split_words(b"text", [b"a"])
    with pytest.raises(TypeError):  # a set could change under the table built from it
        _simhash.split_words(b"text", {b"a"})
    with pytest.raises(TypeError):
        _simhash.split_words(b"text", frozenset({"a"}))
    # A refused set leaves the last good table in use.
    assert _simhash.split_words(b"the near copies", textfp._STOP_UTF8) == ([b"near", b"copies"], [])


class _Lying(frozenset):
    """A frozenset whose iteration yields more words than its size says."""

    def __iter__(self):
        yield from super().__iter__()
        yield from (b"extra%d" % i for i in range(64))


def test_a_frozenset_that_iterates_other_than_its_size_is_read_as_iterated():
    stop = _Lying({b"near"})
    words, _ = _simhash.split_words(b"near extra3 extra63 copies extra64", stop)
    assert words == [b"copies", b"extra64"]
    assert _simhash.split_words(b"the near copies", textfp._STOP_UTF8) == ([b"near", b"copies"], [])
