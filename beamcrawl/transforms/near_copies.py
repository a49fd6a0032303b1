"""Near copies: each new candidate's simhash against the permuted tables of the originals the
crawl keeps, and against this round's other candidates, as sorted merges (content seen's
second half: :mod:`beamcrawl.transforms.content_seen` wires it and settles its decisions).

A candidate crosses the table-bucket shuffle as two 64-bit numbers (:class:`Item`: its
simhash and its URL fingerprint, never its URL), once a group of tables; a bucket's items
are keyed by their row in each of the group's tables (:func:`key_items`), sorted, and merged
against the stored rows of those keys in one pass (:func:`merge_prefix_rows`): every stored
fingerprint in a shared row within :data:`textfp.MAX_DISTANCE` bits is a match, and so is
every pair of this round's candidates that share a row. What the merge finds is
:class:`Evidence`, combined per URL fingerprint; the pairs among this round's candidates are
decided in one place once their URLs are named (:func:`resolve_round`), in
:func:`order_key` order, so a round decides the same whatever its fetch timing or bundles.
A row shared by more than :data:`MAX_PAIRWISE` candidates (a trap serving one text over and
over) is checked against its first originals only (:func:`crowded_pairs`).

Pure functions and records: no I/O, no Beam transforms.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from beamcrawl.core.content import textfp
from beamcrawl.schemas.records import shuffled
from beamcrawl.state.content_rows import parse_simhash_cells

__all__ = [
    "MASK64",
    "MAX_PAIRWISE",
    "Evidence",
    "Item",
    "Keyed",
    "add_evidence",
    "crowded_pairs",
    "key_items",
    "match_key",
    "merge_prefix_rows",
    "order_key",
    "pack_items",
    "resolve_round",
    "uint64s",
    "unpack_items",
]

# A row shared by more of this round's candidates than this (a trap serving one text over
# and over) is checked against its first originals only, not pair by pair.
MAX_PAIRWISE = 64


def order_key(url: str) -> tuple[int, int, str]:
    """Which of two copies is the original: a URL without a query first (``/a`` before
    ``/a?print=1``), then the shorter, then the smaller. A function of the URL alone, so the
    choice is the same whatever order or timing the pages came in."""
    return ("?" in url, len(url), url)


@shuffled
@dataclass(frozen=True)
class Evidence:
    """What the simhash join found for one candidate original (keyed by its URL fingerprint).

    Attributes:
        stored: ``(distance, url)`` of the closest original kept in an earlier round, if any.
        neighbours: ``(url fingerprint, distance)`` of this round's candidates within the
            distance.
        crowded: Whether the candidate is in a row shared by more than :data:`MAX_PAIRWISE`
            of this round's candidates: that row's pairs are found where URLs are known
            (:func:`resolve_round`), as they depend on the URLs' order.
    """

    stored: tuple[int, str] | None = None
    neighbours: frozenset[tuple[int, int]] = field(default_factory=frozenset)
    crowded: bool = False

    def merge(self, other: "Evidence") -> "Evidence":
        stored = self.stored
        if other.stored is not None and (stored is None or match_key(other.stored) < match_key(stored)):
            stored = other.stored
        return Evidence(stored, self.neighbours | other.neighbours, self.crowded or other.crowded)

    @property
    def pending(self) -> bool:
        """Whether its decision needs this round's URLs: near this round's candidates only,
        or in a crowded row (whose order depends on every member's URL)."""
        return (self.stored is None and bool(self.neighbours)) or self.crowded


def match_key(match: tuple[int, str]) -> tuple[int, tuple[int, int, str]]:
    distance, url = match
    return distance, order_key(url)


class Item(NamedTuple):
    """One candidate in one group of permuted tables: 4 per new original (one a group of
    ``TableLayout.bucket_groups``), so only its two 64-bit numbers, never its URL. A
    bundle's items of one bucket cross the table-bucket shuffle as one block of fixed-width
    pairs (:func:`pack_items`); the row key and the permuted fingerprint in each of the
    group's tables are computed where the bucket is merged."""

    fp: int  # the simhash
    url_fp: int  # the candidate's URL fingerprint: its name until the URLs are needed


class Keyed(NamedTuple):
    """An :class:`Item` with its row key in the bucket's table (the merge's view of it)."""

    key: bytes
    fp: int
    url_fp: int


#: An item as it crosses the table-bucket shuffle: the simhash, then the URL fingerprint,
#: each a little-endian uint64 (16 bytes; a pickled tuple of the two ints is 22-23).
_ITEM_DTYPE = np.dtype("<u8")


def pack_items(fps: np.ndarray, url_fps: np.ndarray) -> bytes:
    """One block of items, in the given order: ``(simhash, url fingerprint)`` pairs as
    :data:`_ITEM_DTYPE` (see :func:`unpack_items`)."""
    return np.column_stack((fps, url_fps)).astype(_ITEM_DTYPE, copy=False).tobytes()


def unpack_items(blocks: Iterable[bytes]) -> np.ndarray:
    """The items of :func:`pack_items` blocks, in order, as an ``(n, 2)`` uint64 array.

    Raises:
        ValueError: a block is not a whole number of items (the round wrote it: a bug).
    """
    data = b"".join(blocks)
    if len(data) % (2 * _ITEM_DTYPE.itemsize):
        raise ValueError(f"a table bucket's items are {len(data)} bytes, not whole items")
    return np.frombuffer(data, dtype=_ITEM_DTYPE).reshape(-1, 2).astype(np.uint64)


def key_items(
    table: int, items: Iterable[tuple[int, int]] | np.ndarray, layout: textfp.TableLayout = textfp.LAYOUT
) -> tuple[list[Keyed], float]:
    """A table bucket's items (``(simhash, url fingerprint)`` pairs, or their ``(n, 2)``
    array) with their row keys (``layout.table_key``), sorted by key (stably), and the
    fraction of the table their permuted fingerprints span (what a range scan of their keys
    would read).

    The keys are made over the array: a key is the table byte and the prefix left-aligned
    in ``key_bytes`` big-endian bytes, so keys sort as the prefixes do.
    """
    pairs = items if isinstance(items, np.ndarray) else uint64s([v for item in items for v in item])
    pairs = pairs.reshape(-1, 2)
    if not len(pairs):
        return [], 0.0
    permuted = layout.permute_many(pairs[:, 0], table)
    width, size = layout.prefix_widths[table], layout.key_bytes
    prefixes = permuted >> np.uint64(64 - width)
    order = np.argsort(prefixes, kind="stable")
    aligned = (prefixes[order] << np.uint64(8 * size - width)).astype(">u8").tobytes()
    head, skip = bytes((table,)), 8 - size
    keyed = [
        Keyed(head + aligned[at + skip : at + 8], fp, url_fp)
        for at, fp, url_fp in zip(range(0, 8 * len(order), 8), pairs[order, 0].tolist(), pairs[order, 1].tolist())
    ]
    return keyed, (int(permuted.max()) - int(permuted.min()) + 1) / float(1 << 64)


def merge_prefix_rows(
    items: Sequence[Keyed],
    stored_rows: Iterable[tuple[bytes, Mapping[str, bytes]]],
    round_no: int | None = None,
    max_distance: int = textfp.MAX_DISTANCE,
    max_pairwise: int = MAX_PAIRWISE,
    names: Callable[[list[tuple[int, int]]], Mapping[tuple[int, int], str]] | None = None,
) -> tuple[dict[int, Evidence], list[tuple[tuple[int, int], ...]], int, int]:
    """Merges one bucket's candidates, sorted by key, against the stored rows of their keys.

    The candidates' fingerprints go into uint64 arrays; the rows they share are runs of equal
    keys. Every (candidate, stored original) pair of a shared row, and every pair of this
    round's candidates within a row, is compared at once: XOR, then ``np.bitwise_count``.

    Args:
        items: The candidates in one permuted table, sorted by row key (:func:`key_items`).
        stored_rows: Stored ``(key, cells)`` in key order (may include keys no candidate has).
        round_no: This round (newer rows are ignored).
        max_distance: Most differing bits of a near copy.
        max_pairwise: A row shared by more candidates is crowded (see :class:`Evidence`).
        names: Looks up, in one batch, the URLs of matched originals whose cells here are
            compact (:func:`names_from_rows` over a key-set read); without it, or without a
            name, such a match does not count.

    Returns:
        ``(evidence by url fingerprint, crowded rows, stored fingerprints compared, round
        pairs compared)``; only candidates with a stored match, a neighbour or a crowded row
        appear. A crowded row is its members' ``(fingerprint, url fingerprint)``, sorted.
    """
    found: dict[int, Evidence] = {}
    crowded: list[tuple[tuple[int, int], ...]] = []
    keys = [it.key for it in items]
    wanted = set(keys)
    # One pass over the stored rows (read to their end, so a scan's stream closes).
    shared = {key: cells for key, cells in stored_rows if key in wanted}
    if not items:
        return found, crowded, 0, 0
    fps, url_fps = uint64s([it.fp for it in items]), uint64s([it.url_fp for it in items])
    starts, ends = _runs(keys)
    compared, matches = _stored_matches(items, keys, fps, url_fps, starts, ends, shared, round_no, max_distance)
    sizes = ends - starts
    for start, end in zip(starts[sizes > max_pairwise].tolist(), ends[sizes > max_pairwise].tolist()):
        # Which pairs a crowded row checks depends on its members' URL order: named later.
        group = items[start:end]
        crowded.append(tuple(sorted((it.fp, it.url_fp) for it in group)))
        for item in group:
            add_evidence(found, item.url_fp, Evidence(crowded=True))
    pairs = _round_pairs(fps, url_fps, starts, ends, max_pairwise, found, max_distance)
    # The closest stored original, ties to the first in URL order: compact cells are named first.
    unnamed = sorted({original for _, _, original, url in matches if url is None})
    named = names(unnamed) if unnamed and names is not None else {}
    best: dict[int, tuple[int, str]] = {}
    for url_fp, d, original, url in matches:
        url = url if url is not None else named.get(original)
        if url is not None and (url_fp not in best or match_key((d, url)) < match_key(best[url_fp])):
            best[url_fp] = (d, url)
    for url_fp, match in best.items():
        add_evidence(found, url_fp, Evidence(stored=match))
    return found, crowded, compared, pairs


#: The low 64 bits of an int (a fingerprint read as signed, or wider, is taken to them).
MASK64 = (1 << 64) - 1


def uint64s(values: Sequence[int]) -> np.ndarray:
    """Python ints as a uint64 array, each taken to its low 64 bits as ``textfp.hamming``
    takes them."""
    try:
        return np.array(values, dtype=np.uint64)
    except OverflowError:
        return np.array([v & MASK64 for v in values], dtype=np.uint64)


def _fingerprint_arrays(pairs: Sequence[tuple[Any, ...]]) -> tuple[np.ndarray, np.ndarray]:
    """The simhashes and URL fingerprints of ``(fp, url fp, ...)`` tuples, as uint64 arrays."""
    return uint64s([p[0] for p in pairs]), uint64s([p[1] for p in pairs])


def _runs(keys: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` of the runs of equal keys in a sorted list."""
    n = len(keys)
    width = len(keys[0])
    if all(len(k) == width for k in keys):
        flat = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(n, width)
        change = (flat[1:] != flat[:-1]).any(axis=1)
    else:
        change = np.array([a != b for a, b in zip(keys[1:], keys[:-1])], dtype=bool)
    starts = np.flatnonzero(np.concatenate(([True], change)))
    return starts, np.append(starts[1:], n)


def _hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Differing bits of each pair of uint64 fingerprints."""
    return np.bitwise_count(a ^ b)


def _stored_matches(
    items: Sequence[Keyed],
    keys: Sequence[bytes],
    fps: np.ndarray,
    url_fps: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    shared: Mapping[bytes, Mapping[str, bytes]],
    round_no: int | None,
    max_distance: int,
) -> tuple[int, list[tuple[int, int, tuple[int, int], str | None]]]:
    """Every candidate of a row against every stored original of the row that counts:
    ``(pairs compared, [(candidate url fp, distance, (fp, url fp) of the original, its url
    or None)])``, a candidate's own earlier fingerprint (same URL fingerprint) left out."""
    originals: list[tuple[int, int, str | None]] = []
    item_lo, item_n, orig_lo, orig_n = [], [], [], []
    for start, end in zip(starts.tolist(), ends.tolist()):
        cells = shared.get(keys[start])
        if cells is None:
            continue
        row = parse_simhash_cells(cells, round_no)
        if row:
            item_lo.append(start)
            item_n.append(end - start)
            orig_lo.append(len(originals))
            orig_n.append(len(row))
            originals.extend(row)
    if not originals:
        return 0, []
    per_row = np.array(item_n) * np.array(orig_n)
    total = int(per_row.sum())
    # Pair t of a row: candidate t // (its originals), original t % (its originals).
    row_of = np.repeat(np.arange(len(per_row)), per_row)
    local = np.arange(total) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    width = np.array(orig_n)[row_of]
    item = np.array(item_lo)[row_of] + local // width
    orig = np.array(orig_lo)[row_of] + local % width
    o_fps, o_url_fps = _fingerprint_arrays(originals)
    d = _hamming(fps[item], o_fps[orig])
    near = np.flatnonzero((d <= max_distance) & (url_fps[item] != o_url_fps[orig]))
    matches = []
    for i, o, dist in zip(item[near].tolist(), orig[near].tolist(), d[near].tolist()):
        fp, url_fp, url = originals[o]
        matches.append((items[i].url_fp, dist, (fp, url_fp), url))
    return total, matches


def _round_pairs(
    fps: np.ndarray,
    url_fps: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    max_pairwise: int,
    found: dict[int, Evidence],
    max_distance: int,
) -> int:
    """Adds this round's near pairs within each row of at most ``max_pairwise`` candidates
    (every pair: the order does not matter); returns how many pairs were checked.

    All the bucket's rows at once: step ``k`` compares every candidate with the one ``k``
    places after it in the same row, so a row of ``s`` takes ``s - 1`` steps."""
    sizes = ends - starts
    small = (sizes > 1) & (sizes <= max_pairwise)
    if not small.any():
        return 0
    # For each candidate of a small row, how many of its row come after it.
    after = np.where(np.repeat(small, sizes), np.repeat(ends, sizes) - np.arange(len(fps)) - 1, 0)
    checked = 0
    for k in range(1, int(after.max()) + 1):
        a = np.flatnonzero(after >= k)
        b = a + k
        checked += len(a)
        d = _hamming(fps[a], fps[b])
        near = (d <= max_distance) & (url_fps[a] != url_fps[b])
        for first, second, dist in zip(url_fps[a[near]].tolist(), url_fps[b[near]].tolist(), d[near].tolist()):
            add_evidence(found, first, Evidence(neighbours=frozenset({(second, dist)})))
            add_evidence(found, second, Evidence(neighbours=frozenset({(first, dist)})))
    return checked


def crowded_pairs(
    members: Sequence[tuple[int, int]],
    names: Mapping[int, str],
    neighbours: dict[int, set[tuple[int, int]]],
    max_distance: int,
    max_pairwise: int,
) -> int:
    """A crowded row's pairs: in URL order, each candidate is compared with the row's first
    originals only (at most ``max_pairwise`` of them), not pair by pair.

    A member becomes one of those originals when it matches none of the ones before it; so
    each original, once found, is compared with every member after it in one array step,
    and the next original is the first later member that matched none."""
    ordered = sorted(
        ((fp, url_fp) for fp, url_fp in members if url_fp in names),
        key=lambda m: (order_key(names[m[1]]), m[1], m[0]),
    )
    n = len(ordered)
    if not n:
        return 0
    fps, url_fps = _fingerprint_arrays(ordered)
    matched = np.zeros(n, dtype=bool)
    checked = 0
    at, chosen = 0, 0
    while chosen < max_pairwise:
        rest = np.flatnonzero(~matched[at:])
        if not len(rest):
            break
        first = at + int(rest[0])
        chosen += 1
        later = slice(first + 1, n)
        checked += n - first - 1
        d = _hamming(fps[later], fps[first])
        near = np.flatnonzero((d <= max_distance) & (url_fps[later] != url_fps[first]))
        matched[first + 1 + near] = True
        first_url_fp = ordered[first][1]
        for j, dist in zip((first + 1 + near).tolist(), d[near].tolist()):
            url_fp = ordered[j][1]
            neighbours.setdefault(first_url_fp, set()).add((url_fp, dist))
            neighbours.setdefault(url_fp, set()).add((first_url_fp, dist))
        at = first + 1
    return checked


def add_evidence(found: dict[int, Evidence], url_fp: int, evidence: Evidence) -> None:
    kept = found.get(url_fp)
    found[url_fp] = evidence if kept is None else kept.merge(evidence)


def resolve_round(
    named: Iterable[tuple[str, int, Evidence]],
    crowded: Iterable[Sequence[tuple[int, int]]] = (),
    max_distance: int = textfp.MAX_DISTANCE,
    max_pairwise: int = MAX_PAIRWISE,
) -> list[tuple[int, tuple[str, int]]]:
    """Decides which of this round's mutually near candidates are copies.

    In :func:`order_key` order, a candidate is a near copy of the closest earlier candidate
    that is itself an original; with none, it is an original. Candidates with a stored match
    are copies already (they cannot be anyone's original), but take part in the pairs of a
    crowded row.

    Args:
        named: ``(url, url fingerprint, evidence)`` of every pending candidate
            (:attr:`Evidence.pending`): the only place this step learns URLs.
        crowded: The crowded rows' members, ``(fingerprint, url fingerprint)``.
        max_distance: Most differing bits of a near copy.
        max_pairwise: Most originals a crowded row's candidates are compared with.

    Returns:
        ``(url fingerprint, (original url, distance))`` for each candidate found to be a
        copy. Two URLs of the round with one fingerprint (a 64-bit collision) share one
        name, the first by :func:`order_key`, and so one decision.
    """
    names: dict[int, str] = {}
    evidence: dict[int, Evidence] = {}
    for url, url_fp, ev in named:
        if url_fp not in names or order_key(url) < order_key(names[url_fp]):
            names[url_fp] = url
        kept = evidence.get(url_fp)
        evidence[url_fp] = ev if kept is None else kept.merge(ev)
    neighbours = {url_fp: set(ev.neighbours) for url_fp, ev in evidence.items()}
    for members in crowded:
        crowded_pairs(members, names, neighbours, max_distance, max_pairwise)
    candidates = [fp for fp, ev in evidence.items() if ev.stored is None and neighbours[fp]]
    originals: set[int] = set()
    out: list[tuple[int, tuple[str, int]]] = []
    for url_fp in sorted(candidates, key=lambda fp: (order_key(names[fp]), fp)):
        mine = order_key(names[url_fp])
        earlier = [
            (d, order_key(names[n]), n) for n, d in neighbours[url_fp] if n in originals and order_key(names[n]) < mine
        ]
        if earlier:
            d, _, original = min(earlier)
            out.append((url_fp, (names[original], d)))
        else:
            originals.add(url_fp)
    return out
