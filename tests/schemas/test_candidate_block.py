"""schemas/candidate_block.py: candidates to columns and back, exactly, and as bytes."""

from __future__ import annotations

import dataclasses
import math
import pickle
import struct

import apache_beam as beam
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import beamcrawl.schemas.coders  # noqa: F401  (registers the coders)
from beamcrawl.schemas.candidate_block import CandidateBlock, CandidateBlockCoder
from beamcrawl.schemas.records import Candidate, Packed

_FIELDS = [f.name for f in dataclasses.fields(Candidate)]


def _exact(value: object) -> object:
    """A value compared by type and bits: floats by their bytes (NaN payloads, signed zeros),
    tuples element by element."""
    if type(value) is float:
        return (float, struct.pack("<d", value))
    if type(value) is tuple:
        return (tuple, tuple(_exact(v) for v in value))
    return (type(value), value)


def _same(back: list[Candidate], given_: list[Candidate]) -> None:
    assert len(back) == len(given_)
    for a, b in zip(back, given_):
        assert type(a) is Candidate
        for name in _FIELDS:
            assert _exact(getattr(a, name)) == _exact(getattr(b, name)), name


# Any str a Python string can hold, lone surrogates included (URLs are normalised, but a
# block must not depend on it), and the empty string.
_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
_INT64 = st.integers(-(2**63), 2**63 - 1)

# Values the columns hold, as the stage makes them.
_PLAIN = st.builds(
    Candidate,
    fp=st.integers(0, 2**64 - 1),
    url=_TEXT,
    host=st.one_of(st.sampled_from(["a.test", "b.test", ""]), _TEXT),
    depth=_INT64,
    priority=st.floats(),  # NaN and infinities included: a float64 holds them
    source=st.sampled_from(["link", "sitemap", "feed", "redirect", "seed", ""]),
    inlinks=_INT64,
    inlink_hosts=st.lists(st.integers(0, 2**64 - 1), max_size=4).map(tuple),  # any order, repeats
    kind=st.one_of(st.sampled_from(["page", "sitemap", "feed"]), _TEXT),
    hops=_INT64,
    lastmod=st.one_of(st.none(), st.floats(allow_nan=False)),
    robots_origin=st.one_of(st.none(), st.just(""), _TEXT),
)

# Values they do not: the block then carries the candidates as objects.
_ODD = st.one_of(
    _PLAIN.map(lambda c: dataclasses.replace(c, lastmod=math.nan)),  # NaN is the column's none
    _PLAIN.map(lambda c: dataclasses.replace(c, inlinks=2**70)),
    _PLAIN.map(lambda c: dataclasses.replace(c, depth=True)),  # a bool is an int to numpy
    _PLAIN.map(lambda c: dataclasses.replace(c, priority=1)),  # an int priority stays an int
    _PLAIN.map(lambda c: dataclasses.replace(c, inlink_hosts=[1, 2])),  # a list, not a tuple
    _PLAIN.map(lambda c: dataclasses.replace(c, inlink_hosts=(-1,))),
    _PLAIN.map(lambda c: dataclasses.replace(c, robots_origin=b"http://a.test")),
)


def _round_trips(cands: list[Candidate]) -> CandidateBlock:
    block = CandidateBlock.from_candidates(cands)
    assert len(block) == len(cands)
    _same(block.to_candidates(), cands)
    coder = beam.coders.registry.get_coder(CandidateBlock)
    back = coder.decode(coder.encode(block))
    assert type(back) is CandidateBlock and back.columnar == block.columnar
    _same(back.to_candidates(), cands)
    assert back.fp.tolist() == [c.fp for c in cands]
    return block


@settings(max_examples=300, deadline=None)
@given(st.lists(_PLAIN, max_size=25))
def test_candidates_the_columns_hold_come_back_exactly(cands):
    block = _round_trips(cands)
    assert block.columnar


@settings(max_examples=200, deadline=None)
@given(st.lists(_PLAIN, max_size=10), _ODD, st.lists(_PLAIN, max_size=10))
def test_a_value_the_columns_cannot_hold_keeps_the_block_as_objects(before, odd, after):
    block = _round_trips([*before, odd, *after])
    assert not block.columnar


@settings(max_examples=200, deadline=None)
@given(st.lists(_PLAIN, min_size=1, max_size=25), st.data())
def test_rows_taken_and_blocks_joined_encode_only_their_rows(cands, data):
    """A take shares the buffers, a concat unites vocabularies; either encodes to the rows'
    own values (and a compacted block to the same bytes)."""
    block = CandidateBlock.from_candidates(cands)
    rows = data.draw(st.lists(st.integers(0, len(cands) - 1), max_size=30))
    start = data.draw(st.integers(0, len(cands)))
    end = data.draw(st.integers(start, len(cands)))
    other = CandidateBlock.from_candidates(list(reversed(cands)))
    picked = block.take(np.array(rows, dtype=np.int64))
    run = other.take(slice(start, end))
    joined = CandidateBlock.concat([picked, run, block])
    expected = [cands[i] for i in rows] + list(reversed(cands))[start:end] + cands
    _same(joined.to_candidates(), expected)
    decoded = CandidateBlock.decode(joined.encode())
    _same(decoded.to_candidates(), expected)
    assert joined.compact().encode() == joined.encode()
    # The rows' own strings only, not the buffers they were cut from: each URL's path in the
    # text, its scheme and authority (a prefix its host's URLs share) among the prefixes.
    alone = CandidateBlock.decode(picked.encode())
    assert len(alone.url_text) == sum(len(_path_of(cands[i].url)) for i in rows)
    assert set(alone.prefixes) == {cands[i].url[: len(cands[i].url) - len(_path_of(cands[i].url))] for i in rows}


def _path_of(url: str) -> str:
    """What follows ``scheme://authority`` in a URL (the whole of one without ``://``)."""
    at = url.find("://")
    if at < 0:
        return url
    end = url.find("/", at + 3)
    return "" if end < 0 else url[end:]


def test_a_block_is_a_few_buffers_not_a_pickle_per_candidate():
    cands = [
        Candidate(fp=(i * 0x9E3779B97F4A7C15) % 2**64, url=f"http://h{i % 30}.test/p/{i}", host=f"h{i % 30}.test",
                  depth=1 + i % 5, priority=0.5 ** (1 + i % 5), inlink_hosts=(i * 7919 % 2**32,) if i % 2 else ())
        for i in range(1000)
    ]  # fmt: skip
    encoded = CandidateBlockCoder().encode(CandidateBlock.from_candidates(cands))
    assert b"Candidate" not in encoded and b"/p/0/p/1/p/2/p/3" in encoded  # paths, one after another
    # A host's name once as a host, once as its URLs' scheme and authority, however many rows.
    assert encoded.count(b"h7.test") == 2 and encoded.count(b"http://") == 30
    assert len(encoded) < len(pickle.dumps(Packed(cands), pickle.HIGHEST_PROTOCOL))


def test_a_fingerprint_that_is_not_64_bits_is_refused():
    ok = Candidate(fp=1, url="u", host="h", depth=0, priority=1.0)
    for fp in (-1, 2**64, 1.0, None, "1"):
        with pytest.raises(ValueError):
            CandidateBlock.from_candidates([ok, dataclasses.replace(ok, fp=fp)])


@pytest.mark.parametrize("cut", [1, 9, 20, -1])
def test_bytes_cut_short_or_padded_do_not_decode(cut):
    block = CandidateBlock.from_candidates(
        [Candidate(fp=5, url="http://a.test/", host="a.test", depth=1, priority=0.5)]
    )
    data = block.encode()
    with pytest.raises(ValueError):
        CandidateBlock.decode(data[:cut] if cut > 0 else data + b"\x00")


def test_another_value_under_the_type_still_round_trips():
    coder = CandidateBlockCoder()
    for value in (None, [1, 2], Packed()):
        assert coder.decode(coder.encode(value)) == value


def test_a_taken_row_with_a_bare_scheme_separator_keeps_its_url():
    # Found by CI: "://" is all prefix (no path), so the taken row's text is empty.
    cands = [
        Candidate(fp=i, url=u, host="a.test", depth=0, priority=0.0, source="link", inlinks=0)
        for i, u in enumerate(["", "://", "http://h.test/p"])
    ]
    block = CandidateBlock.from_candidates(cands)
    for rows in ([1], [2, 1], [0, 1, 2]):
        alone = CandidateBlock.decode(block.take(np.array(rows, dtype=np.int64)).encode())
        assert [c.url for c in alone.to_candidates()] == [cands[i].url for i in rows]
        assert len(alone.url_text) == sum(len(_path_of(cands[i].url)) for i in rows)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_PLAIN, _PLAIN, _ODD), max_size=12))
def test_a_block_from_rows_of_field_values_is_the_candidates_block(cands):
    """``from_rows`` (URL seen's offers, made without a Candidate each) gives the block
    ``from_candidates`` gives: the same candidates back, exactly, columnar or not alike."""
    rows = [tuple(getattr(c, f) for f in _FIELDS) for c in cands]
    by_rows, by_objects = CandidateBlock.from_rows(rows), CandidateBlock.from_candidates(cands)
    assert by_rows.columnar == by_objects.columnar
    _same(by_rows.to_candidates(), cands)
    _same(by_objects.to_candidates(), cands)


def test_rows_refuse_what_candidates_refuse():
    good = tuple(
        getattr(Candidate(fp=1, url="http://a.test/", host="a.test", depth=0, priority=0.5), f) for f in _FIELDS
    )
    for fp in (-1, 2**64, "1", 1.0):
        with pytest.raises(ValueError):
            CandidateBlock.from_rows([good, (fp, *good[1:])])
    with pytest.raises(ValueError):
        CandidateBlock.from_rows([good[:-1]])
    assert len(CandidateBlock.from_rows([])) == 0
