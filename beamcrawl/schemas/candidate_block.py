"""CandidateBlock: URL seen's candidates as columns, the element its bucket shuffle carries.

URL seen (transforms/url_seen.py) combines a bundle's offers per fingerprint, cuts them into
fingerprint buckets and shuffles them to the bucket's merge with the seen set. Most of them
are known URLs whose only fate there is to be compared by fingerprint and dropped; as one
``Candidate`` object each, every one was pickled, unpickled and rebuilt on the way. A block
holds them as numpy columns instead (issue #25: "whatever does shuffle is fingerprints and
small fixed-width columns"): fingerprints, depths, hops, in-links, priorities and lastmods
as arrays, kind, source, host and robots.txt origin as codes into small vocabularies, the
linking hosts flattened with offsets, the URLs as a code for their scheme and authority and
the rest in one string with offsets. It encodes as a
few array buffers (:meth:`CandidateBlock.encode`; its Beam coder is in schemas/coders.py),
and only the rows that need it (the new URLs) become ``Candidate`` objects again.

A block is exact: :meth:`~CandidateBlock.to_candidates` gives back the very values
:meth:`~CandidateBlock.from_candidates` was given, of the same Python types. Values the
columns cannot hold exactly (an int past 64 bits, a NaN lastmod, which the column uses for
"none", a float where an int belongs, a list for a tuple) make the whole block carry its
candidates as objects (:attr:`~CandidateBlock.objects`), merged by ``Candidate.merge`` as
before; only the fingerprint column is required of every block, so that it can be bucketed.

Rows may share and skip parts of the URL string and the linking-host array (a block cut out
of another one, or combined from several, refers to their buffers): :meth:`encode` writes
only what its rows use.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from itertools import chain
from typing import Any, Iterable, Sequence

import numpy as np

from beamcrawl.schemas.columns import (
    BlockCoder,
    ERRORS,
    STR,
    NotColumnar,
    Reader,
    Writer,
    encode_codes,
    gather_index,
    path_at,
    types_are,
)
from beamcrawl.schemas.records import Candidate, Packed

__all__ = ["CandidateBlock", "CandidateBlockCoder"]


_INT64 = (-(1 << 63), (1 << 63) - 1)


@dataclass(eq=False)
class CandidateBlock:
    """Candidates as columns, one row each, in the order given (a bucket's: by fingerprint).

    ``kind``, ``source``, ``host``, ``origin`` and ``prefix`` are codes into ``kinds``,
    ``sources``, ``hosts``, ``origins`` and ``prefixes`` (``origin`` -1: no robots.txt
    origin); ``lastmod`` is NaN for none; row ``i``'s URL is its prefix (scheme and
    authority, shared by a host's URLs) then ``url_text[url_start[i]:url_end[i]]``, and its
    linking hosts ``link_hosts[link_start[i]:link_end[i]]``. ``objects`` holds the candidates themselves
    when the columns could not (then only ``fp`` is filled).
    """

    fp: np.ndarray  # uint64
    depth: np.ndarray  # int64
    hops: np.ndarray  # int64
    inlinks: np.ndarray  # int64
    priority: np.ndarray  # float64
    lastmod: np.ndarray  # float64, NaN = none
    kind: np.ndarray  # int64 codes
    source: np.ndarray
    host: np.ndarray
    origin: np.ndarray  # -1 = none
    prefix: np.ndarray
    kinds: tuple[str, ...]
    sources: tuple[str, ...]
    hosts: tuple[str, ...]
    origins: tuple[str, ...]
    prefixes: tuple[str, ...]
    url_text: str
    url_start: np.ndarray  # int64
    url_end: np.ndarray
    link_hosts: np.ndarray  # uint64
    link_start: np.ndarray  # int64
    link_end: np.ndarray
    objects: Packed | None = None

    def __len__(self) -> int:
        return len(self.fp)

    @property
    def columnar(self) -> bool:
        """Whether the columns hold the candidates (else :attr:`objects` does)."""
        return self.objects is None

    # --- to and from candidates ---------------------------------------------------------------

    @classmethod
    def empty(cls) -> CandidateBlock:
        return cls.from_candidates([])

    @classmethod
    def from_candidates(cls, cands: Sequence[Candidate]) -> CandidateBlock:
        """The candidates as a block, in their order.

        Raises:
            ValueError: A fingerprint is not an int in [0, 2**64) (the one value every block
                needs as a column; the caller sets that candidate aside).
        """
        fp = _fingerprints([c.fp for c in cands])
        if not set(map(type, cands)) <= {Candidate}:
            return _objects(fp, Packed(cands))  # a subclass's own fields would be lost
        try:
            return _columns(_fields_of(cands), fp)
        except NotColumnar:
            return _objects(fp, Packed(cands))

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[Any, ...]]) -> CandidateBlock:
        """The block of the candidates whose field values, in ``Candidate``'s field order,
        are ``rows``: exactly ``from_candidates([Candidate(*row) for row in rows])``, with no
        ``Candidate`` made unless the columns cannot hold the values.

        Raises:
            ValueError: As :meth:`from_candidates`.
        """
        if any(len(row) != _CANDIDATE_FIELDS for row in rows):
            raise ValueError(f"a candidate row of other than {_CANDIDATE_FIELDS} values")
        fp = _fingerprints([row[0] for row in rows])
        try:
            return _columns(_transposed(rows), fp)
        except NotColumnar:
            return _objects(fp, Packed(Candidate(*row) for row in rows))

    def to_candidates(self, rows: Iterable[int] | np.ndarray | None = None) -> list[Candidate]:
        """The candidates of ``rows`` (positions, default all), in that order."""
        if rows is None:
            idx = np.arange(len(self), dtype=np.int64)
        else:
            idx = np.asarray(rows if isinstance(rows, np.ndarray) else list(rows), dtype=np.int64)
        if self.objects is not None:
            return [self.objects[i] for i in idx.tolist()]
        if not len(idx):
            return []
        text = self.url_text
        prefixes = self.prefixes
        urls = [
            prefixes[p] + text[a:b]
            for p, a, b in zip(self.prefix[idx].tolist(), self.url_start[idx].tolist(), self.url_end[idx].tolist())
        ]
        hosts_vocab, kinds, sources = self.hosts, self.kinds, self.sources
        origins = (*self.origins, None)  # code -1: none
        flat = self.link_hosts
        starts, ends = self.link_start[idx], self.link_end[idx]
        if int((ends - starts).sum()):
            values = flat[gather_index(starts, ends)].tolist()
            bounds = np.cumsum(ends - starts).tolist()
            linked = [tuple(values[a:b]) for a, b in zip([0, *bounds[:-1]], bounds)]
        else:
            linked = [()] * len(idx)
        lastmod = [None if v != v else v for v in self.lastmod[idx].tolist()]
        return [
            Candidate(fp, url, hosts_vocab[h], depth, prio, sources[s], n, lh, kinds[k], hops, lm, origins[o])
            for fp, url, h, depth, prio, s, n, lh, k, hops, lm, o in zip(
                self.fp[idx].tolist(), urls, self.host[idx].tolist(), self.depth[idx].tolist(),
                self.priority[idx].tolist(), self.source[idx].tolist(), self.inlinks[idx].tolist(), linked,
                self.kind[idx].tolist(), self.hops[idx].tolist(), lastmod, self.origin[idx].tolist(),
            )
        ]  # fmt: skip

    def dated(self) -> np.ndarray:
        """Per row, whether it has a lastmod."""
        if self.objects is not None:
            return np.fromiter((c.lastmod is not None for c in self.objects), dtype=bool, count=len(self))
        return ~np.isnan(self.lastmod)

    # --- rows ---------------------------------------------------------------------------------

    def take(self, rows: slice | np.ndarray) -> CandidateBlock:
        """The block of ``rows`` (a slice, or an array of positions), sharing the buffers."""
        if self.objects is not None:
            picked = self.objects[rows] if isinstance(rows, slice) else [self.objects[i] for i in rows.tolist()]
            return _objects(self.fp[rows], Packed(picked))
        return dataclasses.replace(
            self,
            **{name: getattr(self, name)[rows] for name in _ROW_COLUMNS},
        )

    def with_columns(self, **columns: Any) -> CandidateBlock:
        """The block with some columns (and their buffers or vocabularies) replaced."""
        return dataclasses.replace(self, **columns)

    @classmethod
    def concat(cls, blocks: Sequence[CandidateBlock]) -> CandidateBlock:
        """The rows of ``blocks`` one after another, in one block (vocabularies united)."""
        if len(blocks) == 1:
            return blocks[0]
        if not blocks:
            return cls.empty()
        if any(b.objects is not None for b in blocks):
            cands = [c for b in blocks for c in b.to_candidates()]
            return _objects(np.concatenate([b.fp for b in blocks]), Packed(cands))
        coded: dict[str, Any] = {}
        vocabs: dict[str, Any] = {}
        for code, vocab in _CODED:
            united = tuple(dict.fromkeys(chain.from_iterable(getattr(b, vocab) for b in blocks)))
            index = {v: i for i, v in enumerate(united)}
            parts = []
            for b in blocks:
                # One more entry at the end, so that code -1 (none) maps to -1.
                remap = np.array([index[v] for v in getattr(b, vocab)] + [-1], dtype=np.int64)
                parts.append(remap[getattr(b, code)])
            coded[code] = np.concatenate(parts)
            vocabs[vocab] = united
        text_at = np.cumsum([0] + [len(b.url_text) for b in blocks])
        link_at = np.cumsum([0] + [len(b.link_hosts) for b in blocks])
        plain: dict[str, Any] = {name: np.concatenate([getattr(b, name) for b in blocks]) for name in _PLAIN_COLUMNS}
        return cls(
            **plain,
            **coded,
            **vocabs,
            url_text="".join(b.url_text for b in blocks),
            url_start=np.concatenate([b.url_start + at for b, at in zip(blocks, text_at.tolist())]),
            url_end=np.concatenate([b.url_end + at for b, at in zip(blocks, text_at.tolist())]),
            link_hosts=np.concatenate([b.link_hosts for b in blocks]),
            link_start=np.concatenate([b.link_start + at for b, at in zip(blocks, link_at.tolist())]),
            link_end=np.concatenate([b.link_end + at for b, at in zip(blocks, link_at.tolist())]),
        )

    def used(self) -> int:
        """URL characters and linking hosts the rows refer to."""
        if self.objects is not None:
            return 0
        return int((self.url_end - self.url_start).sum() + (self.link_end - self.link_start).sum())

    def buffered(self) -> int:
        """URL characters and linking hosts the block's buffers hold (some maybe unused)."""
        return len(self.url_text) + len(self.link_hosts)

    def compact(self) -> CandidateBlock:
        """The same rows with the URL string and linking hosts laid out in row order, nothing
        else kept (so that any run of rows is a contiguous part of both)."""
        if self.objects is not None:
            return self
        text, url_end = _compact_text(self.url_text, self.url_start, self.url_end)
        lens = self.link_end - self.link_start
        link_end = np.cumsum(lens)
        return dataclasses.replace(
            self,
            url_text=text,
            url_start=url_end - (self.url_end - self.url_start),
            url_end=url_end,
            link_hosts=self.link_hosts[gather_index(self.link_start, self.link_end)],
            link_start=link_end - lens,
            link_end=link_end,
        )

    # --- bytes --------------------------------------------------------------------------------

    def encode(self) -> bytes:
        """The block as bytes: a format byte, then length-prefixed array buffers (integers
        in the narrowest type that holds them, floats as a dictionary where few differ)."""
        out = Writer()
        if not out.head(self.fp, self.objects):
            return out.getvalue()
        for name in ("depth", "hops", "inlinks"):
            out.ints(getattr(self, name))
        out.floats(self.priority)
        out.floats(self.lastmod)
        for code, vocab in _CODED:
            codes, used = _compact_codes(getattr(self, code), getattr(self, vocab))
            out.ints(codes)
            out.strings(used)
        text, _ = _compact_text(self.url_text, self.url_start, self.url_end)
        out.blob(text.encode(STR, ERRORS))
        out.ints(self.url_end - self.url_start)
        out.ints(self.link_end - self.link_start)
        hosts = self.link_hosts[gather_index(self.link_start, self.link_end)]
        out.array(hosts.astype(np.uint32) if len(hosts) and int(hosts.max()) < (1 << 32) else hosts)
        return out.getvalue()

    @classmethod
    def decode(cls, data: bytes) -> CandidateBlock:
        """A block from :meth:`encode`'s bytes.

        Raises:
            ValueError: The bytes are not an encoded block.
        """
        src = Reader(data, "candidate block")
        fp, objects = src.head()
        if objects is not None:
            return _objects(fp, objects)
        depth, hops, inlinks = (src.ints() for _ in range(3))
        priority, lastmod = src.floats(), src.floats()
        coded: dict[str, Any] = {}
        for code, vocab in _CODED:
            coded[code] = codes = src.ints()
            coded[vocab] = words = tuple(src.strings())
            if len(codes) and (int(codes.min()) < -1 or int(codes.max()) >= len(words)):
                raise ValueError("an encoded candidate block with a code outside its vocabulary")
        text = src.blob().decode(STR, ERRORS)
        url_end = np.cumsum(src.ints())
        link_end = np.cumsum(src.ints())
        link_hosts = src.array().astype(np.uint64)
        src.done()
        n = len(fp)
        if not all(len(a) == n for a in (depth, hops, inlinks, priority, lastmod, url_end, link_end)):
            raise ValueError("an encoded candidate block with columns of unequal length")
        if (n and int(url_end[-1]) != len(text)) or (n and int(link_end[-1]) != len(link_hosts)):
            raise ValueError("an encoded candidate block whose offsets do not match its buffers")
        url_lens = np.diff(url_end, prepend=0)
        link_lens = np.diff(link_end, prepend=0)
        return cls(
            fp=fp, depth=depth, hops=hops, inlinks=inlinks, priority=priority, lastmod=lastmod, **coded,
            url_text=text, url_start=url_end - url_lens, url_end=url_end,
            link_hosts=link_hosts, link_start=link_end - link_lens, link_end=link_end,
        )  # fmt: skip


class CandidateBlockCoder(BlockCoder):
    """A :class:`CandidateBlock` as :meth:`CandidateBlock.encode`'s bytes (registered for the type in
    schemas/coders.py). Anything else emitted under the type is pickled."""

    BLOCK = CandidateBlock


# The per-row arrays a take() cuts (the vocabularies, URL string and host buffer are shared).
_PLAIN_COLUMNS = ("fp", "depth", "hops", "inlinks", "priority", "lastmod")
_CODED = (
    ("kind", "kinds"), ("source", "sources"), ("host", "hosts"), ("origin", "origins"), ("prefix", "prefixes"),
)  # fmt: skip
_ROW_COLUMNS = (*_PLAIN_COLUMNS, *(c for c, _ in _CODED), "url_start", "url_end", "link_start", "link_end")


def _int64(values: Sequence[int]) -> np.ndarray:
    types_are(values, {int})
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError as exc:
        raise NotColumnar(str(exc)) from exc


_CANDIDATE_FIELDS = len(dataclasses.fields(Candidate))


def _fields_of(cands: Sequence[Candidate]) -> list[list[Any]]:
    """The candidates' field values, a list a field in ``Candidate``'s field order (a
    comprehension a field: measured cheaper than ``attrgetter`` rows or ``map`` columns)."""
    return [
        [c.fp for c in cands], [c.url for c in cands], [c.host for c in cands], [c.depth for c in cands],
        [c.priority for c in cands], [c.source for c in cands], [c.inlinks for c in cands],
        [c.inlink_hosts for c in cands], [c.kind for c in cands], [c.hops for c in cands],
        [c.lastmod for c in cands], [c.robots_origin for c in cands], [c.not_before for c in cands],
    ]  # fmt: skip


def _fingerprints(fps: list[Any]) -> np.ndarray:
    """The fingerprint column.

    Raises:
        ValueError: A fingerprint is not an int in [0, 2**64).
    """
    if not set(map(type, fps)) <= {int}:
        raise ValueError("a fingerprint that is not an int")
    try:
        return np.array(fps, dtype=np.uint64)
    except OverflowError as exc:
        raise ValueError(f"a fingerprint out of 64 bits: {exc}") from exc


def _transposed(rows: Iterable[tuple[Any, ...]]) -> Sequence[Sequence[Any]]:
    """Rows of field values as one tuple a field (as many empty ones for no rows)."""
    return list(zip(*rows)) or [()] * _CANDIDATE_FIELDS


def _columns(values: Sequence[Sequence[Any]], fp: np.ndarray) -> CandidateBlock:
    """The block of candidates given as their fields' values (``Candidate``'s field order)."""
    (_, urls_in, hosts_in, depths, prio, sources_in, inlinks, linked, kinds_in, hops, lastmod, origins_in) = values[:12]
    holds = values[12]
    if holds.count(None) != len(holds):
        raise NotColumnar("a redirect target's hold (no column holds one)")
    n = len(fp)
    types_are(urls_in, {str})
    # Each URL as its scheme and authority (one code: a host's URLs share it) and the rest.
    cut = [path_at(u) for u in urls_in]
    prefix, prefixes = encode_codes([u[:i] for u, i in zip(urls_in, cut)])
    urls = [u[i:] for u, i in zip(urls_in, cut)]
    types_are(prio, {float})
    types_are(lastmod, {float, type(None)})
    stamps = np.array([math.nan if v is None else v for v in lastmod], dtype=np.float64)
    if np.isnan(stamps).sum() != lastmod.count(None):
        raise NotColumnar("a NaN lastmod (the column's none)")
    types_are(linked, {tuple})
    lens = np.fromiter(map(len, linked), dtype=np.int64, count=n)
    flat_values = list(chain.from_iterable(linked))
    types_are(flat_values, {int})
    try:
        flat = np.array(flat_values, dtype=np.uint64)
    except OverflowError as exc:
        raise NotColumnar(str(exc)) from exc
    kind, kinds = encode_codes(kinds_in)
    source, sources = encode_codes(sources_in)
    host, hosts = encode_codes(hosts_in)
    origin, origins = encode_codes(origins_in, none_ok=True)
    url_end = np.cumsum(np.fromiter(map(len, urls), dtype=np.int64, count=n))
    link_end = np.cumsum(lens)
    return CandidateBlock(
        fp=fp,
        depth=_int64(depths),
        hops=_int64(hops),
        inlinks=_int64(inlinks),
        priority=np.array(prio, dtype=np.float64),
        lastmod=stamps,
        kind=kind, source=source, host=host, origin=origin, prefix=prefix,
        kinds=kinds, sources=sources, hosts=hosts, origins=origins, prefixes=prefixes,
        url_text="".join(urls),
        url_start=url_end - np.fromiter(map(len, urls), dtype=np.int64, count=n),
        url_end=url_end,
        link_hosts=flat,
        link_start=link_end - lens,
        link_end=link_end,
    )  # fmt: skip


def _objects(fp: np.ndarray, objects: Packed) -> CandidateBlock:
    none = np.zeros(0, dtype=np.int64)
    return CandidateBlock(
        fp=fp, depth=none, hops=none, inlinks=none, priority=none.astype(np.float64),
        lastmod=none.astype(np.float64), kind=none, source=none, host=none, origin=none,
        prefix=none, kinds=(), sources=(), hosts=(), origins=(), prefixes=(), url_text="", url_start=none, url_end=none,
        link_hosts=none.astype(np.uint64), link_start=none, link_end=none, objects=objects,
    )  # fmt: skip


def _compact_text(text: str, starts: np.ndarray, ends: np.ndarray) -> tuple[str, np.ndarray]:
    """The rows' strings one after another, and each one's end in it."""
    lens = ends - starts
    out_end = np.cumsum(lens)
    if not len(starts):
        return "", out_end
    if (starts[1:] == ends[:-1]).all():  # a run of rows laid out in order: one slice
        return text[int(starts[0]) : int(ends[-1])], out_end
    if text.isascii():  # a character is a byte: gather the bytes
        raw = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
        return raw[gather_index(starts, ends)].tobytes().decode("ascii"), out_end
    return "".join(text[a:b] for a, b in zip(starts.tolist(), ends.tolist())), out_end


def _compact_codes(codes: np.ndarray, vocab: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """The codes renumbered over the vocabulary entries they use (in vocabulary order)."""
    if not len(codes):
        return codes, []
    used = np.zeros(len(vocab) + 1, dtype=bool)
    used[codes] = True  # code -1 marks the extra last slot
    keep = np.flatnonzero(used[:-1])
    if len(keep) == len(vocab):
        return codes, list(vocab)
    renumber = np.full(len(vocab) + 1, -1, dtype=np.int64)
    renumber[keep] = np.arange(len(keep))
    return renumber[codes], [vocab[i] for i in keep.tolist()]
