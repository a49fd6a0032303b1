"""The columnar blocks' shared parts: their bytes (length-prefixed array buffers) and the
checks that a value fits a column exactly.

A block that crosses a shuffle as columns (``candidate_block.py``: URL seen's candidates;
``probe_block.py``: content seen's probes) writes itself with a :class:`Writer` and reads
itself back with a :class:`Reader`: integers in the narrowest type that holds them, float64s
bit for bit, strings as one UTF-8 buffer (lone surrogates kept) and their lengths. A block
whose values a column cannot give back exactly, of the same Python type, raises
:class:`NotColumnar` while it is built and carries its records as objects instead.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, Iterable, Sequence

import apache_beam as beam
import numpy as np

__all__ = [
    "BlockCoder",
    "ERRORS",
    "STR",
    "NotColumnar",
    "Reader",
    "Writer",
    "encode_codes",
    "gather_index",
    "path_at",
    "types_are",
]

STR = "utf-8"
ERRORS = "surrogatepass"  # a Python str may hold lone surrogates: kept, byte for byte


class NotColumnar(Exception):
    """A value the columns would not give back exactly."""


def types_are(values: Iterable[Any], allowed: set[type]) -> None:
    """Raises :class:`NotColumnar` unless every value's type is one of ``allowed`` exactly."""
    if not set(map(type, values)) <= allowed:
        raise NotColumnar("a value of another type")


def gather_index(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Positions of the ranges ``[starts[i], ends[i])`` one after another (an index that
    gathers them into one contiguous buffer)."""
    lens = ends - starts
    total = int(lens.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(lens) - lens
    return np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, lens)


def path_at(url: str) -> int:
    """Where a URL's path begins (after ``scheme://authority``; 0 if it has no ``://``)."""
    at = url.find("://")
    if at < 0:
        return 0
    end = url.find("/", at + 3)
    return len(url) if end < 0 else end


def encode_codes(values: Sequence[Any], none_ok: bool = False) -> tuple[np.ndarray, tuple[str, ...]]:
    """Codes into a vocabulary (in order of first appearance); None is code -1."""
    types_are(values, {str, type(None)} if none_ok else {str})
    vocab = dict.fromkeys(values)
    vocab.pop(None, None)
    index: dict[Any, int] = {v: i for i, v in enumerate(vocab)}
    index[None] = -1
    return np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values)), tuple(vocab)


_DTYPES: dict[int, np.dtype[Any]] = {
    ord("b"): np.dtype("<i1"), ord("h"): np.dtype("<i2"), ord("i"): np.dtype("<i4"), ord("q"): np.dtype("<i8"),
    ord("B"): np.dtype("<u1"), ord("I"): np.dtype("<u4"), ord("Q"): np.dtype("<u8"), ord("d"): np.dtype("<f8"),
}  # fmt: skip
_CODE_OF = {dt: code for code, dt in _DTYPES.items()}
BLOCK_FORMAT = 1  # the first byte of an encoded block (never _OTHER)
_COLUMNS = 1  # after the key column: the other columns follow
_OBJECTS = 2  # after the key column: the records, pickled whole
_HEAD = struct.Struct("<BQ")  # dtype code, element count
_LEN = struct.Struct("<Q")


class Writer:
    """Builds a block's bytes, part by part."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def raw(self, data: bytes) -> None:
        self.parts.append(data)

    def blob(self, data: bytes) -> None:
        self.parts += [_LEN.pack(len(data)), data]

    def array(self, values: np.ndarray) -> None:
        dt = values.dtype.newbyteorder("<")
        self.parts += [_HEAD.pack(_CODE_OF[dt], len(values)), values.astype(dt, copy=False).tobytes()]

    def ints(self, values: np.ndarray) -> None:
        """Signed integers in the narrowest of 8, 16, 32 and 64 bits that holds them all."""
        lo, hi = (int(values.min()), int(values.max())) if len(values) else (0, 0)
        for dt in ("<i1", "<i2", "<i4"):
            info = np.iinfo(dt)
            if info.min <= lo and hi <= info.max:
                self.array(values.astype(dt))
                return
        self.array(values.astype("<i8"))

    def floats(self, values: np.ndarray) -> None:
        """Float64s, bit for bit (NaN payloads and the sign of zero kept): as a dictionary of
        their distinct bit patterns and a code each where that is smaller."""
        bits = values.view(np.uint64) if values.dtype == np.float64 else values.astype(np.float64).view(np.uint64)
        distinct, codes = np.unique(bits, return_inverse=True)
        if len(distinct) <= 255 and len(distinct) < len(values) // 2:
            self.raw(b"\x01")
            self.array(distinct.astype(np.uint64).view(np.float64))
            self.ints(codes.astype(np.int64))
        else:
            self.raw(b"\x00")
            self.array(values.astype(np.float64, copy=False))

    def strings(self, values: Sequence[str]) -> None:
        self.blob("".join(values).encode(STR, ERRORS))
        self.ints(np.fromiter(map(len, values), dtype=np.int64, count=len(values)))

    def head(self, key: np.ndarray, objects: Any | None) -> bool:
        """A block's head: the format byte, its key column (uint64, every block has it), then
        either its records pickled whole (``objects``; the block is then complete) or the
        mark that columns follow. Returns whether they do."""
        self.raw(bytes((BLOCK_FORMAT,)))
        self.array(key.astype(np.uint64, copy=False))
        if objects is not None:
            self.raw(bytes((_OBJECTS,)))
            self.blob(pickle.dumps(objects, pickle.HIGHEST_PROTOCOL))
            return False
        self.raw(bytes((_COLUMNS,)))
        return True

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class Reader:
    """Reads a :class:`Writer`'s parts back in order; every error is a ValueError that names
    the block (``what``: "candidate block", "probe block")."""

    def __init__(self, data: bytes, what: str) -> None:
        self.view = memoryview(data)
        self.at = 0
        self.what = what

    def fail(self, why: str) -> ValueError:
        return ValueError(f"an encoded {self.what} {why}")

    def head(self) -> tuple[np.ndarray, Any | None]:
        """:meth:`Writer.head` read back: the key column, and the records when the block
        holds them whole (then nothing may follow), else None (the columns follow).

        Raises:
            ValueError: Not an encoded block, or of an unknown layout.
        """
        if self.raw(1) != bytes((BLOCK_FORMAT,)):
            raise ValueError(f"not an encoded {self.what}")
        key = self.array().astype(np.uint64, copy=False)
        mode = self.raw(1)
        if mode == bytes((_OBJECTS,)):
            objects = pickle.loads(self.blob())
            self.done()
            return key, objects
        if mode != bytes((_COLUMNS,)):
            raise self.fail("of an unknown layout")
        return key, None

    def raw(self, n: int) -> bytes:
        if self.at + n > len(self.view):
            raise self.fail("cut short")
        out = bytes(self.view[self.at : self.at + n])
        self.at += n
        return out

    def blob(self) -> bytes:
        (n,) = _LEN.unpack(self.raw(_LEN.size))
        return self.raw(n)

    def array(self) -> np.ndarray:
        code, n = _HEAD.unpack(self.raw(_HEAD.size))
        dt = _DTYPES.get(code)
        if dt is None:
            raise self.fail("with an unknown column type")
        size = n * dt.itemsize
        if self.at + size > len(self.view):
            raise self.fail("cut short")
        out = np.frombuffer(self.view, dtype=dt, count=n, offset=self.at)
        self.at += size
        return out

    def ints(self) -> np.ndarray:
        return self.array().astype(np.int64)

    def floats(self) -> np.ndarray:
        mode = self.raw(1)
        if mode == b"\x01":
            distinct = self.array().astype(np.float64)
            codes = self.ints()
            if len(codes) and (int(codes.min()) < 0 or int(codes.max()) >= len(distinct)):
                raise self.fail("with a bad float code")
            return distinct[codes]
        return self.array().astype(np.float64)

    def strings(self) -> list[str]:
        text = self.blob().decode(STR, ERRORS)
        lens = self.ints()
        if len(lens) and int(lens.min()) < 0:
            raise self.fail("with a negative string length")
        ends = np.cumsum(lens).tolist()
        if (ends[-1] if ends else 0) != len(text):
            raise self.fail("whose strings do not match their lengths")
        return [text[a:b] for a, b in zip([0, *ends[:-1]], ends)]

    def done(self) -> None:
        if self.at != len(self.view):
            raise self.fail("with bytes left over")


class BlockCoder(beam.coders.Coder):
    """A columnar block (``BLOCK``, a class with ``encode()`` and ``decode(bytes)``) as its
    own bytes, registered for its type in schemas/coders.py. Anything else emitted under the
    type is pickled, behind a byte no block starts with."""

    BLOCK: Any = None

    def encode(self, value: Any) -> bytes:
        if type(value) is self.BLOCK:
            return value.encode()
        return _OTHER + pickle.dumps(value, pickle.HIGHEST_PROTOCOL)

    def decode(self, encoded: bytes) -> Any:
        if encoded[:1] == _OTHER:
            return pickle.loads(encoded[1:])
        return self.BLOCK.decode(encoded)

    def is_deterministic(self) -> bool:
        return False  # never a grouping key

    def to_type_hint(self) -> Any:
        return self.BLOCK


_OTHER = b"\xff"  # then the pickled value: not a block (a block's first byte is its format)
