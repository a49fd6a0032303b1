"""A batch of new URLs' cells made at once from their columns (issue #25: "cells get a
compact binary encoding", written as sorted runs, with no Python object a row).

URL seen's merge finds a bucket's new URLs as rows of a :class:`CandidateBlock`; each costs a
frontier row (``r:json``, layout 0x01) and a seen-set row (``u:q``, layout 0x02), both
described in schemas/cells.py. Made one URL at a time, that was a ``Candidate``, a
``FrontierEntry``, two ``struct.pack`` calls and the strings encoded a row (some 9 µs of a
new URL's 19 in a round). Here the fixed heads are filled as numpy structured arrays of the
very same layout, the strings are encoded once per vocabulary (a block holds its hosts,
sources, kinds, origins and URL prefixes as codes) and once for all URL texts, and each
cell's bytes are gathered from those buffers in one numpy index; only the cut into one
``bytes`` a cell is left per row.

The cells are byte for byte what :func:`~beamcrawl.schemas.cells.encode_frontier` and
:func:`~beamcrawl.schemas.cells.encode_queued` make of the same values. Where a block's values
do not fit the binary layout (a string past 65,535 bytes, a depth past 32 bits, URL text that
is not ASCII, whose byte offsets are not its character offsets), these functions give None
and the caller makes the cells one entry at a time, as before, which also writes the JSON
fallback cells such values need.
"""

from __future__ import annotations

import struct
from typing import Sequence

import numpy as np

from beamcrawl.schemas import cells as binary
from beamcrawl.schemas.candidate_block import CandidateBlock
from beamcrawl.schemas.columns import gather_index

__all__ = ["frontier_cells", "frontier_keys", "queued_cells", "seen_keys"]

_NUMPY_CODES = {"B": "u1", "H": "<u2", "I": "<u4", "i": "<i4", "q": "<i8", "Q": "<u8", "d": "<f8"}
_MAX_LEN = 0xFFFF  # an H length
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _dtype(layout: struct.Struct) -> np.dtype:
    """A packed numpy record of ``layout``'s fields (a little-endian, unpadded ``struct``
    format of one-letter codes), the same bytes a row as ``layout.pack``."""
    fmt = layout.format
    if fmt[0] != "<" or not set(fmt[1:]) <= _NUMPY_CODES.keys():
        raise TypeError(f"not a little-endian layout of plain fields: {fmt!r}")
    dtype = np.dtype([(f"f{i}", _NUMPY_CODES[code]) for i, code in enumerate(fmt[1:])])
    if dtype.itemsize != layout.size:
        raise TypeError(f"{fmt!r}: {dtype.itemsize} bytes as numpy, {layout.size} as struct")
    return dtype


_FRONTIER_ROW = _dtype(binary.FRONTIER_HEAD)
_QUEUED_ROW = _dtype(binary.QUEUED_HEAD)


class _Strings:
    """A vocabulary's strings encoded once, one after another: each code's offset and length
    in :attr:`data`; code -1 (none) reads as the empty string."""

    def __init__(self, values: Sequence[str]) -> None:
        encoded = [v.encode("utf-8", "surrogatepass") for v in values]
        self.data = b"".join(encoded)
        self.length = np.array([*map(len, encoded), 0], dtype=np.int64)
        self.offset = np.cumsum(self.length) - self.length  # the last (none) at the end: empty
        self.longest = int(self.length.max())


# Rows whose cells one gather makes: the gather's index is 8 bytes an output byte, so a
# bucket of 10,000 new URLs cut at once held some 30 MB of index (bench/README.md, "URL
# seen's rows cut in chunks"); 2,048 rows of ~200-300 B hold 4-5 MB.
CUT_ROWS = 2_048


def _cut(parts: Sequence[tuple[bytes, np.ndarray, np.ndarray]], rows: int) -> list[bytes]:
    """Row ``i``'s cell: the ``i``-th range of each part, parts in order (each part a
    buffer, and per row a start in it and a length), as one ``bytes``; ``CUT_ROWS`` rows
    gathered at a time."""
    bases = np.cumsum([0, *(len(data) for data, _, _ in parts)])[:-1].tolist()
    source = np.frombuffer(b"".join(data for data, _, _ in parts), dtype=np.uint8)
    starts = np.stack([start + base for (_, start, _), base in zip(parts, bases)], axis=1)
    lengths = np.stack([length for _, _, length in parts], axis=1)
    cells: list[bytes] = []
    for at in range(0, rows, CUT_ROWS):
        first, size = starts[at : at + CUT_ROWS].ravel(), lengths[at : at + CUT_ROWS]
        joined = source[gather_index(first, first + size.ravel())].tobytes()
        ends = np.cumsum(size.sum(axis=1)).tolist()
        cells += [joined[a:b] for a, b in zip([0, *ends[:-1]], ends)]
    return cells


def _fields(heads: np.ndarray) -> list[np.ndarray]:
    """The structured array's fields, in layout order (views: writing one fills the heads)."""
    return [heads[name] for name in heads.dtype.names or ()]


def _heads(heads: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    size = heads.dtype.itemsize
    n = len(heads)
    return heads.tobytes(), np.arange(n, dtype=np.int64) * size, np.full(n, size, dtype=np.int64)


def _urls(block: CandidateBlock) -> tuple[_Strings, bytes, np.ndarray] | None:
    """The URL parts (prefix vocabulary, text bytes) and each row's URL length in bytes;
    None when the text is not ASCII or a URL is too long for its length field."""
    if not block.columnar or not block.url_text.isascii():
        return None
    prefixes = _Strings(block.prefixes)
    length = prefixes.length[block.prefix] + (block.url_end - block.url_start)
    if len(length) and int(length.max()) > _MAX_LEN:
        return None
    return prefixes, block.url_text.encode("ascii"), length


def _in(values: np.ndarray, bounds: tuple[int, int]) -> bool:
    return not len(values) or (bounds[0] <= int(values.min()) and int(values.max()) <= bounds[1])


def frontier_cells(block: CandidateBlock, due_ms: int, priority: np.ndarray, reason: str) -> list[bytes] | None:
    """Each row's frontier cell (``r:json``, binary), as ``FrontierEntry.to_cells`` writes the
    entry of that candidate due at ``due_ms`` with ``priority`` and ``reason`` (no deferrals,
    no other keys, no revisit state: a URL never seen); None when a value does not fit."""
    urls = _urls(block)
    if urls is None or type(due_ms) is not int or not _INT64[0] <= due_ms <= _INT64[1]:
        return None
    if not (_in(block.depth, _INT32) and _in(block.hops, _INT32)):
        return None
    prefixes, text, url_length = urls
    hosts, sources, kinds, origins = (_Strings(v) for v in (block.hosts, block.sources, block.kinds, block.origins))
    why = _Strings([reason])
    if max(hosts.longest, sources.longest, kinds.longest, origins.longest, why.longest) > _MAX_LEN:
        return None
    n = len(block)
    has_lastmod = ~np.isnan(block.lastmod)
    heads = np.zeros(n, dtype=_FRONTIER_ROW)
    f = _fields(heads)
    f[0][:] = binary.FRONTIER
    f[1][:] = np.where(has_lastmod, binary.FRONTIER_LASTMOD, 0) | np.where(block.origin >= 0, binary.FRONTIER_ORIGIN, 0)
    f[2][:], f[3][:], f[4][:], f[5][:], f[6][:] = block.fp, due_ms, priority, block.depth, block.inlinks
    f[8][:], f[9][:] = block.hops, np.where(has_lastmod, block.lastmod, 0.0)  # f[7], deferrals: 0
    f[10][:] = url_length
    f[11][:], f[12][:], f[13][:] = hosts.length[block.host], sources.length[block.source], kinds.length[block.kind]
    f[14][:], f[15][:] = why.length[0], origins.length[block.origin]  # f[16], f[17]: no also_keys, no revisit
    none = np.zeros(n, dtype=np.int64)
    parts = [
        _heads(heads),
        (prefixes.data, prefixes.offset[block.prefix], prefixes.length[block.prefix]),
        (text, block.url_start, block.url_end - block.url_start),
        (hosts.data, hosts.offset[block.host], hosts.length[block.host]),
        (sources.data, sources.offset[block.source], sources.length[block.source]),
        (kinds.data, kinds.offset[block.kind], kinds.length[block.kind]),
        (why.data, none, none + why.length[0]),
        (origins.data, origins.offset[block.origin], origins.length[block.origin]),
    ]
    return _cut(parts, n)


def queued_cells(block: CandidateBlock, first_seen_ms: int) -> list[bytes] | None:
    """Each row's seen-set cell (``u:q``, binary), as ``UrlState.discovered_cells`` writes it
    for the candidate's URL, source and depth, first seen at ``first_seen_ms``; None when a
    value does not fit."""
    urls = _urls(block)
    if urls is None or type(first_seen_ms) is not int or not _INT64[0] <= first_seen_ms <= _INT64[1]:
        return None
    prefixes, text, url_length = urls
    sources = _Strings(block.sources)
    if sources.longest > _MAX_LEN:
        return None
    n = len(block)
    heads = np.zeros(n, dtype=_QUEUED_ROW)
    f = _fields(heads)
    f[0][:], f[1][:] = binary.QUEUED, binary.QUEUED_SOURCE | binary.QUEUED_DEPTH
    f[2][:], f[3][:], f[4][:], f[5][:] = first_seen_ms, block.depth, url_length, sources.length[block.source]
    parts = [
        _heads(heads),
        (prefixes.data, prefixes.offset[block.prefix], prefixes.length[block.prefix]),
        (text, block.url_start, block.url_end - block.url_start),
        (sources.data, sources.offset[block.source], sources.length[block.source]),
    ]
    return _cut(parts, n)


def frontier_keys(due_ms: int, fps: np.ndarray) -> list[bytes]:
    """``frontier_key(due_ms, fp)`` of each fingerprint (due time, then fingerprint, both
    big-endian 64 bits)."""
    keys = np.empty(len(fps), dtype=[("due", ">u8"), ("fp", ">u8")])
    keys["due"], keys["fp"] = due_ms, fps
    raw = keys.tobytes()
    return [raw[i : i + 16] for i in range(0, len(raw), 16)]


def seen_keys(fps: np.ndarray) -> list[bytes]:
    """``fp_key(fp)`` of each fingerprint (big-endian 64 bits)."""
    raw = np.asarray(fps, dtype=">u8").tobytes()
    return [raw[i : i + 8] for i in range(0, len(raw), 8)]
