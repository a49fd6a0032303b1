"""ProbeBlock: content seen's probes as columns, the element its checksum-bucket shuffle carries.

Content seen (transforms/content_seen.py) cuts a bundle's probes into checksum buckets and
shuffles each bucket to its merge with the content-seen set. As a pickled list a probe cost
some 126 bytes there: its URL, its WARC payload digest as 37 characters of text, four
numbers, and pickle's framing. A block holds them as columns instead (issue #25: "whatever
does shuffle is fingerprints and small fixed-width columns"): checksums, URL fingerprints
and simhashes as uint64 arrays (the simhashes of the probes that have one), fetch times as
float64s bit for bit, the digests as 20 raw bytes each when every one is ``sha1:`` and 32
base32 characters (else as text), the URLs as a code for their scheme and authority
(a host's pages share it) and the rest in one string with offsets, and the batch file each
page waits in as a code (a bundle's pages share a few).

A block is exact: :meth:`ProbeBlock.probes` gives back the very values
:meth:`ProbeBlock.from_probes` was given, of the same Python types. A probe the columns
cannot hold exactly (a number past 64 bits, an int fetch time, a subclass) makes the whole
block carry its probes as objects; only the checksum column is required of every block, as
the merge groups by it.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from beamcrawl.schemas.columns import (
    BlockCoder,
    NotColumnar,
    Reader,
    Writer,
    encode_codes,
    path_at,
    types_are,
)
from beamcrawl.schemas.records import Packed, Probe

__all__ = ["ProbeBlock", "ProbeBlockCoder"]

_DIGEST_RAW = b"\x01"  # every digest sha1: + 32 base32 characters, as 20 bytes
_DIGEST_TEXT = b"\x00"

_SHA1 = "sha1:"
_B32 = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"  # RFC 4648 section 6
_B32_VALUE = np.full(256, 255, dtype=np.uint8)
_B32_VALUE[np.frombuffer(_B32, dtype=np.uint8)] = np.arange(32, dtype=np.uint8)
_B32_CHAR = np.frombuffer(_B32, dtype=np.uint8)
_FIVE_BITS = np.array([16, 8, 4, 2, 1], dtype=np.uint8)


@dataclass(eq=False)
class ProbeBlock:
    """Probes as columns, one row each, in the order given.

    ``simhash`` holds 0 where ``has_simhash`` is False. ``objects`` holds the probes
    themselves when the columns could not (then only ``checksum`` is filled).
    """

    checksum: np.ndarray  # uint64
    url_fp: np.ndarray  # uint64
    simhash: np.ndarray  # uint64
    has_simhash: np.ndarray  # bool
    fetched_at: np.ndarray  # float64
    urls: list[str]
    digests: list[str]
    batches: list[str]
    objects: Packed | None = None

    def __len__(self) -> int:
        return len(self.checksum)

    @classmethod
    def from_probes(cls, probes: Sequence[Probe]) -> ProbeBlock:
        """The probes as a block, in their order.

        Raises:
            ValueError: A checksum is not an int in [0, 2**64) (the one column every block
                needs; the caller sets that probe aside).
        """
        columns = list(zip(*map(_FIELDS, probes))) if probes else [()] * 7
        checksum = _uint64s(list(columns[2]), "checksum", strict=ValueError)
        try:
            types_are(probes, {Probe})
            return _columns(columns, checksum)
        except NotColumnar:
            return cls._of_objects(checksum, Packed(probes))

    @classmethod
    def _of_objects(cls, checksum: np.ndarray, objects: Packed) -> ProbeBlock:
        none = np.zeros(0, dtype=np.uint64)
        return cls(checksum, none, none, none.astype(bool), none.astype(np.float64), [], [], [], objects)

    @classmethod
    def concat(cls, blocks: Sequence[ProbeBlock]) -> ProbeBlock:
        """The rows of ``blocks`` one after another, in one block."""
        if len(blocks) == 1:
            return blocks[0]
        if not blocks:
            return cls.from_probes([])
        checksum = np.concatenate([b.checksum for b in blocks])
        if any(b.objects is not None for b in blocks):
            return cls._of_objects(checksum, Packed(p for b in blocks for p in b.probes()))
        return cls(
            checksum,
            np.concatenate([b.url_fp for b in blocks]),
            np.concatenate([b.simhash for b in blocks]),
            np.concatenate([b.has_simhash for b in blocks]),
            np.concatenate([b.fetched_at for b in blocks]),
            [u for b in blocks for u in b.urls],
            [d for b in blocks for d in b.digests],
            [n for b in blocks for n in b.batches],
        )

    def probes(self, rows: np.ndarray | None = None) -> list[Probe]:
        """The probes of ``rows`` (positions, default all), in that order."""
        if self.objects is not None:
            return list(self.objects) if rows is None else [self.objects[i] for i in rows.tolist()]
        pick: np.ndarray | slice = slice(None) if rows is None else rows
        if rows is None:
            urls, digests, batches = self.urls, self.digests, self.batches
        else:
            at = rows.tolist()
            urls, digests = list(map(self.urls.__getitem__, at)), list(map(self.digests.__getitem__, at))
            batches = list(map(self.batches.__getitem__, at))
        has = self.has_simhash[pick]
        simhash = self.simhash[pick].tolist()
        if not has.all():
            simhash = [s if h else None for s, h in zip(simhash, has.tolist())]
        return list(
            map(Probe, urls, self.url_fp[pick].tolist(), self.checksum[pick].tolist(), simhash,
                self.fetched_at[pick].tolist(), digests, batches)
        )  # fmt: skip

    # --- bytes --------------------------------------------------------------------------------

    def encode(self) -> bytes:
        """The block as bytes: a format byte, the checksums, then the other columns (or the
        probes pickled, for a block of objects)."""
        out = Writer()
        if not out.head(self.checksum, self.objects):
            return out.getvalue()
        out.array(self.url_fp)
        out.array(self.has_simhash.astype(np.uint8))
        out.array(self.simhash[self.has_simhash])
        out.floats(self.fetched_at)
        raw = _raw_digests(self.digests)
        if raw is None:
            out.raw(_DIGEST_TEXT)
            out.strings(self.digests)
        else:
            out.raw(_DIGEST_RAW)
            out.blob(raw)
        # Each URL as its scheme and authority (a code: a host's pages share it) and the rest.
        cut = [path_at(u) for u in self.urls]
        prefix, prefixes = encode_codes([u[:i] for u, i in zip(self.urls, cut)])
        out.ints(prefix)
        out.strings(prefixes)
        out.strings([u[i:] for u, i in zip(self.urls, cut)])
        # The batches as codes too: a bundle's pages wait in a few batch files.
        batch, batches = encode_codes(self.batches)
        out.ints(batch)
        out.strings(batches)
        return out.getvalue()

    @classmethod
    def decode(cls, data: bytes) -> ProbeBlock:
        """A block from :meth:`encode`'s bytes.

        Raises:
            ValueError: The bytes are not an encoded block.
        """
        src = Reader(data, "probe block")
        checksum, objects = src.head()
        if objects is not None:
            return cls._of_objects(checksum, objects)
        n = len(checksum)
        url_fp = src.array().astype(np.uint64, copy=False)
        has_simhash = src.array().astype(bool)
        simhash = np.zeros(len(has_simhash), dtype=np.uint64)
        values = src.array().astype(np.uint64, copy=False)
        if len(values) != int(has_simhash.sum()):
            raise src.fail("whose simhashes do not match their mask")
        simhash[has_simhash] = values
        fetched_at = src.floats()
        digest_mode = src.raw(1)
        if digest_mode == _DIGEST_RAW:
            digests = _text_digests(src.blob(), n, src)
        elif digest_mode == _DIGEST_TEXT:
            digests = src.strings()
        else:
            raise src.fail("with an unknown digest layout")
        prefix = src.ints()
        prefixes = src.strings()
        rests = src.strings()
        batch = src.ints()
        batch_names = src.strings()
        src.done()
        if not all(len(c) == n for c in (url_fp, has_simhash, fetched_at, digests, prefix, rests, batch)):
            raise src.fail("with columns of unequal length")
        for codes, vocabulary in ((prefix, prefixes), (batch, batch_names)):
            if n and (int(codes.min()) < 0 or int(codes.max()) >= len(vocabulary)):
                raise src.fail("with a code outside its vocabulary")
        urls = [prefixes[p] + rest for p, rest in zip(prefix.tolist(), rests)]
        batches = list(map(batch_names.__getitem__, batch.tolist()))
        return cls(checksum, url_fp, simhash, has_simhash, fetched_at, urls, digests, batches)


class ProbeBlockCoder(BlockCoder):
    """A :class:`ProbeBlock` as :meth:`ProbeBlock.encode`'s bytes (registered for the type in
    schemas/coders.py). Anything else emitted under the type is pickled."""

    BLOCK = ProbeBlock


_FIELDS = operator.attrgetter("url", "url_fp", "checksum", "simhash", "fetched_at", "digest", "batch")  # Probe's order


def _uint64s(values: list[Any], what: str, strict: type[Exception] = NotColumnar) -> np.ndarray:
    """``values`` as a uint64 array, each an int in [0, 2**64); else ``strict`` is raised."""
    if not set(map(type, values)) <= {int}:
        raise strict(f"a {what} that is not an int")
    try:
        return np.array(values, dtype=np.uint64)
    except OverflowError as exc:
        raise strict(f"a {what} out of 64 bits: {exc}") from exc


def _columns(columns: list[tuple[Any, ...]], checksum: np.ndarray) -> ProbeBlock:
    """A block of probes' field values (``_FIELDS`` of each, as columns)."""
    urls, url_fps, _, hashes, stamps, digests, batches = columns
    url_fp = _uint64s(list(url_fps), "URL fingerprint")
    has_simhash = np.fromiter((h is not None for h in hashes), dtype=bool, count=len(hashes))
    simhash = np.zeros(len(hashes), dtype=np.uint64)
    simhash[has_simhash] = _uint64s([h for h in hashes if h is not None], "simhash")
    types_are(stamps, {float})
    types_are(urls, {str})
    types_are(digests, {str})
    types_are(batches, {str})
    return ProbeBlock(
        checksum,
        url_fp,
        simhash,
        has_simhash,
        np.array(stamps, dtype=np.float64),
        list(urls),
        list(digests),
        list(batches),
    )


def _raw_digests(digests: list[str]) -> bytes | None:
    """The digests as 20 raw bytes each, if every one is ``sha1:`` and 32 base32 characters
    (RFC 4648's alphabet, upper case: exactly what 20 bytes encode to); else None."""
    if not digests:
        return b""
    if any(len(d) != 37 or not d.startswith(_SHA1) for d in digests):
        return None
    tails = "".join(d[5:] for d in digests)
    if not tails.isascii():
        return None
    values = _B32_VALUE[np.frombuffer(tails.encode("ascii"), dtype=np.uint8)]
    if (values == 255).any():
        return None
    bits = np.unpackbits(values.reshape(-1, 32, 1), axis=2)[:, :, 3:]  # 5 bits a character
    return np.packbits(bits.reshape(-1, 160), axis=1).tobytes()


def _text_digests(raw: bytes, n: int, src: Reader) -> list[str]:
    """:func:`_raw_digests` undone: ``sha1:`` and the base32 of each 20 bytes."""
    if len(raw) != 20 * n:
        raise src.fail("whose digests are not 20 bytes each")
    if not n:
        return []
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8).reshape(n, 20), axis=1).reshape(n, 32, 5)
    text = _B32_CHAR[bits @ _FIVE_BITS].tobytes().decode("ascii")
    return [_SHA1 + text[at : at + 32] for at in range(0, 32 * n, 32)]
