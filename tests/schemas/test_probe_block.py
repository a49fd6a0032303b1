"""schemas/probe_block.py: content seen's probes to columns and back, exactly, and as bytes."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import pickle
import struct

import apache_beam as beam
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import beamcrawl.schemas.coders  # noqa: F401  (registers the coders)
from beamcrawl.schemas.probe_block import ProbeBlock, ProbeBlockCoder
from beamcrawl.schemas.records import Packed, Probe

_FIELDS = [f.name for f in dataclasses.fields(Probe)]


def _exact(value: object) -> object:
    """A value compared by type and bits (floats by their bytes: NaN payloads, signed zeros)."""
    if type(value) is float:
        return (float, struct.pack("<d", value))
    return (type(value), value)


def _same(back: list[Probe], given_: list[Probe]) -> None:
    assert len(back) == len(given_)
    for a, b in zip(back, given_):
        assert type(a) is Probe
        for name in _FIELDS:
            assert _exact(getattr(a, name)) == _exact(getattr(b, name)), name


# Any str a Python string can hold, lone surrogates included.
_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
_U64 = st.integers(0, 2**64 - 1)
_URL = st.one_of(
    _TEXT,
    st.builds(lambda h, p: f"http://{h}{p}", st.sampled_from(["a.test", "b.test:8080", "xn--bcher-kva.test"]), _TEXT),
)
_SHA1_TEXT = st.binary(min_size=20, max_size=20).map(lambda d: "sha1:" + base64.b32encode(d).decode())
# Digests as the fetch writes them, and others a block must keep as they are.
_DIGEST = st.one_of(_SHA1_TEXT, _TEXT, st.just("sha1:" + "a" * 32), st.just("sha256:" + "A" * 52))

# The batch a page waits in: a bundle's few file names, several for a URL fetched twice.
_BATCH = st.one_of(st.sampled_from(["", "part-a.batch", "part-b.batch", "part-a.batch part-b.batch"]), _TEXT)
_PLAIN = st.builds(
    Probe,
    url=_URL,
    url_fp=_U64,
    checksum=_U64,
    simhash=st.one_of(st.none(), _U64),
    fetched_at=st.floats(),  # NaN and infinities included: a float64 holds them
    digest=_SHA1_TEXT,
    batch=_BATCH,
)
_ANY_DIGEST = st.builds(Probe, url=_URL, url_fp=_U64, checksum=_U64, simhash=st.none(), fetched_at=st.floats(),
                        digest=_DIGEST, batch=_BATCH)  # fmt: skip

# Values the columns do not hold: the block then carries the probes as objects.
_ODD = st.one_of(
    _PLAIN.map(lambda p: dataclasses.replace(p, fetched_at=1_700_000_000)),  # an int stays an int
    _PLAIN.map(lambda p: dataclasses.replace(p, url_fp=2**64)),
    _PLAIN.map(lambda p: dataclasses.replace(p, simhash=-1)),
    _PLAIN.map(lambda p: dataclasses.replace(p, simhash=True)),  # a bool is an int to numpy
    _PLAIN.map(lambda p: dataclasses.replace(p, url=b"http://a.test/")),
    _PLAIN.map(lambda p: dataclasses.replace(p, digest=None)),
    _PLAIN.map(lambda p: dataclasses.replace(p, batch=None)),
)


def _round_trips(probes: list[Probe]) -> ProbeBlock:
    block = ProbeBlock.from_probes(probes)
    assert len(block) == len(probes)
    _same(block.probes(), probes)
    coder = beam.coders.registry.get_coder(ProbeBlock)
    back = coder.decode(coder.encode(block))
    assert type(back) is ProbeBlock and (back.objects is None) == (block.objects is None)
    _same(back.probes(), probes)
    assert back.checksum.tolist() == [p.checksum for p in probes]
    return block


@settings(max_examples=300, deadline=None)
@given(st.lists(_PLAIN, max_size=25))
def test_probes_the_columns_hold_come_back_exactly(probes):
    assert _round_trips(probes).objects is None


@settings(max_examples=200, deadline=None)
@given(st.lists(_ANY_DIGEST, max_size=12))
def test_digests_of_any_form_come_back_exactly(probes):
    assert _round_trips(probes).objects is None


@settings(max_examples=200, deadline=None)
@given(st.lists(_PLAIN, max_size=10), _ODD, st.lists(_PLAIN, max_size=10))
def test_a_value_the_columns_cannot_hold_keeps_the_block_as_objects(before, odd, after):
    assert _round_trips([*before, odd, *after]).objects is not None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.one_of(_PLAIN, _ODD), max_size=6), max_size=5), st.data())
def test_blocks_joined_and_rows_taken_keep_their_probes(lists, data):
    blocks = [ProbeBlock.decode(ProbeBlock.from_probes(probes).encode()) for probes in lists]
    joined = ProbeBlock.concat(blocks)
    expected = [p for probes in lists for p in probes]
    _same(joined.probes(), expected)
    assert joined.checksum.tolist() == [p.checksum for p in expected]
    if expected:
        rows = data.draw(st.lists(st.integers(0, len(expected) - 1), max_size=10))
        _same(joined.probes(np.array(rows, dtype=np.int64)), [expected[i] for i in rows])


def _probe(i: int) -> Probe:
    url = f"http://h{i % 30}.test/p/{i}.html"
    digest = "sha1:" + base64.b32encode(hashlib.sha1(url.encode()).digest()).decode()
    batch = f"part-{i % 3}.batch"
    return Probe(url, i * 7919, (i * 0x9E3779B97F4A7C15) % 2**64, i if i % 3 else None, 1.7e9 + i / 7, digest, batch)


def test_a_block_is_columns_not_a_pickle_per_probe():
    probes = [_probe(i) for i in range(1000)]
    encoded = ProbeBlockCoder().encode(ProbeBlock.from_probes(probes))
    assert b"Probe" not in encoded and b"sha1:" not in encoded  # raw digests, no record pickled
    assert encoded.count(b"http://") == 30  # a host's scheme and authority once
    assert hashlib.sha1(probes[5].url.encode()).digest() in encoded
    assert encoded.count(b"part-0.batch") == 1  # the batches as codes: each name once
    packed = len(pickle.dumps(Packed(probes), pickle.HIGHEST_PROTOCOL))
    assert len(encoded) < 0.7 * packed


def test_a_checksum_that_is_not_64_bits_is_refused():
    ok = _probe(1)
    for checksum in (-1, 2**64, 1.0, None):
        with pytest.raises(ValueError):
            ProbeBlock.from_probes([ok, dataclasses.replace(ok, checksum=checksum)])


@pytest.mark.parametrize("cut", [1, 9, 20, 60, -1])
def test_bytes_cut_short_or_padded_do_not_decode(cut):
    data = ProbeBlock.from_probes([_probe(1), _probe(2)]).encode()
    with pytest.raises(ValueError):
        ProbeBlock.decode(data[:cut] if cut > 0 else data + b"\x00")


@settings(max_examples=200, deadline=None)
@given(st.lists(_PLAIN, min_size=1, max_size=5), st.data())
def test_flipped_bytes_decode_to_a_block_or_a_value_error(probes, data):
    """A corrupted block never decodes to columns of unequal length or codes outside their
    vocabulary: it is refused, or it is a block whose probes can be made."""
    raw = bytearray(ProbeBlock.from_probes(probes).encode())
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] ^= data.draw(st.integers(1, 255))
    try:
        block = ProbeBlock.decode(bytes(raw))
    except (ValueError, pickle.UnpicklingError, UnicodeDecodeError):
        return
    assert len(block.probes()) == len(block)


def test_another_value_under_the_type_still_round_trips():
    coder = ProbeBlockCoder()
    for value in (None, [1, 2], Packed()):
        assert coder.decode(coder.encode(value)) == value
