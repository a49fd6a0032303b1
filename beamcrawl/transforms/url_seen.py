"""URL seen? DRUM-style: batched sort-merge of discovered URLs against the seen set.

Discovered URLs arrive normalised and fingerprinted (64-bit, from the parse stage), one
list of candidates per batch of pages. Each bundle combines them per fingerprint (in-link
counts add up) and emits one block per fingerprint bucket — the
fingerprint's top bits, so a bucket is one contiguous key range of the seen set. A block
(``CandidateBlock``, schemas/candidate_block.py) holds its candidates as columns, so what
crosses the bucket shuffle is fingerprints and small fixed-width arrays, not a pickled
object per URL; in a round the blocks themselves wait on disk, in span files of the round's
staging (core/runtime/batch_files.py), and only a span per block (file, offset, length)
crosses the shuffle, so the runner does not hold the round's discovered URLs until the last
bundle is done. After a ``GroupByKey`` on bucket, each bucket's blocks are combined and
sorted as arrays (:func:`combine_blocks`, under ``Candidate.merge``'s rules) and their
fingerprints merged against the keys of its range (a keys-only range scan), a chunk of keys
at a time, by ``searchsorted`` (:func:`seen_mask`); only the new URLs, and the known ones a
sitemap dates, become objects again. No per-URL lookups anywhere. Only never-seen URLs join
the frontier, and they are queued (frontier row written) before they are marked seen, so a
crash between the two writes loses nothing. A known URL offered with a hold (its redirect's
Retry-After) has the hold staged for the round's commit, with the frontier keys its seen-set
row names (one key-set read of those few rows): the commit moves its pending visit to the hold.

At scale. The bucket count follows the data: at pipeline construction the seen set's size
is estimated from the store (``Store.estimate_rows``, cheap) and the bits are chosen so a
bucket's range holds at most :data:`TARGET_KEYS_PER_BUCKET` stored keys (and, given a
candidate estimate, at most :data:`TARGET_CANDIDATES_PER_BUCKET` candidates). Each bucket
then takes the cheaper of two paths, by a cost estimate (transforms/store_join.py): it scans the
keys of its range between its first and last candidate, or, where that span holds many
stored keys and the bucket has few candidates, it reads just the candidates' keys in one
batched key-set request. Both paths feed the same one-pass merge; the counters
``url_seen/path_scan`` and ``url_seen/path_keyset`` count the buckets that took each.

In front of the join, each link's shape is checked (core/urls/urlshape.py): a URL too long, too
deep, with a path segment repeated, of another scheme or naming a binary file is not
offered at all (counted as ``url_seen/shape_<reason>``), so traps that look like traps never
reach the seen set or the frontier.

Governed by: --seen-bucket-bits (at least 2^bits buckets; more when the seen set is large),
--max-url-length, --max-url-depth, --max-segment-repeats, --fetch-documents.
"""

from __future__ import annotations

import errno
import math
from itertools import chain, islice
from typing import Any, Iterable, Iterator, MutableMapping, Sequence

import apache_beam as beam
import mmh3
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows

from beamcrawl.core.content.sitemaps import (
    LastmodTrust,
    lastmod_change_probability,
    lastmod_claim,
    origin,
)
from beamcrawl.core.policy.change_rate import (
    RevisitState,
    change_probability,
    importance,
    redirect_allowed,
)
from beamcrawl.core.policy.politeness import redirect_hold
from beamcrawl.core.runtime import files, gctune
from beamcrawl.core.runtime.batch_files import SpanRef, read_spans, write_spans
from beamcrawl.core.runtime.config import MAX_REDIRECTS
from beamcrawl.core.runtime.outputs import part_name
from beamcrawl.core.urls.urlnorm import host_of
from beamcrawl.core.urls.urlshape import REASONS, ShapeRules
from beamcrawl.schemas.candidate_block import CandidateBlock
from beamcrawl.schemas.columns import gather_index
from beamcrawl.schemas.records import (
    MAX_INLINK_HOSTS,
    REVISIT_CELL,
    Batched,
    Candidate,
    FrontierEntry,
    Packed,
    PageBatch,
    ParsedPage,
    follow_rows,
    fp_key,
    later_hold,
    revisit_value,
)
import beamcrawl.schemas.coders  # noqa: F401  (registers the record coders the output types name)
from beamcrawl.state.frontier import (
    Hold,
    QueuedUrls,
    due_of,
    held_until,
    hold_text,
    pending_keys,
    queue_new_block,
    queue_new_urls,
)
from beamcrawl.stores.base import Mutation, open_store
from beamcrawl.transforms import dead_letter
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collect
from beamcrawl.transforms.store_join import KEY_CHUNK, JoinPath, StoreJoin
from beamcrawl.state.frontier import scheduled_key

__all__ = [
    "ExtractCandidates",
    "QueueUnseenUrls",
    "bucket_blocks",
    "bucket_lists",
    "bucket_of",
    "bucket_range",
    "choose_bucket_bits",
    "combine_blocks",
    "combine_candidates",
    "fingerprints",
    "fp_keys",
    "merge_unseen",
    "seen_mask",
]

# Distinct fingerprints a bundle combines before it passes its lists on (~200 B each held).
COMBINE_AT_MOST = 50_000
# Offers a bundle collects before it combines them with those it holds (one array pass).
COMBINE_BATCH = 4_096


# The staging folder where a round's candidate blocks wait for the merge (never committed).
CANDIDATE_BLOCKS = "candidateblocks"

MAX_BUCKET_BITS = 16
# A bucket's range scan should stay short (seconds) and its work even across workers.
TARGET_KEYS_PER_BUCKET = 1 << 20
# A bucket's candidates are held (and sorted) in one worker's memory.
TARGET_CANDIDATES_PER_BUCKET = 1 << 16


def link_priority(depth: int) -> float:
    """Breadth first by default: each hop from a seed halves the priority."""
    return max(0.5**depth, 1e-3)


def bucket_of(fp: int, bits: int) -> int:
    return fp >> (64 - bits) if bits else 0


def bucket_range(bucket: int, bits: int) -> tuple[bytes, bytes | None]:
    """The seen-set key range [start, end) of a bucket (end None = to the end of the table)."""
    if bits == 0:
        return b"", None
    width = 1 << (64 - bits)
    start = bucket * width
    end = start + width
    return fp_key(start), (fp_key(end) if end < (1 << 64) else None)


def choose_bucket_bits(
    seen_rows: int,
    candidates: int | None = None,
    *,
    min_bits: int = 0,
    max_bits: int = MAX_BUCKET_BITS,
) -> int:
    """Bucket bits for a seen set of ``seen_rows`` keys and about ``candidates`` offers.

    The fewest bits (at least ``min_bits``) such that a bucket's range holds at most
    :data:`TARGET_KEYS_PER_BUCKET` stored keys and at most
    :data:`TARGET_CANDIDATES_PER_BUCKET` candidates, capped at ``max_bits``.
    """
    need = max(seen_rows / TARGET_KEYS_PER_BUCKET, (candidates or 0) / TARGET_CANDIDATES_PER_BUCKET, 1.0)
    bits = max(min_bits, math.ceil(math.log2(need)))
    return max(0, min(bits, max_bits))


def combine_candidates(groups: Iterable[Iterable[Candidate]]) -> list[Candidate]:
    """Combines offers per fingerprint, sorted by fingerprint: in-links add up, the best
    priority wins (``Candidate.merge``'s rules, applied as array operations).

    One stable argsort of the fingerprints finds each fingerprint's offers in the order they
    came; an offer made once is passed on as it is, and the offers of one fingerprint are
    reduced column by column (``np.minimum.reduceat`` for depth and hops, ``np.add.reduceat``
    for in-links, a ``lexsort`` for the best offer and the latest lastmod, ties to the first
    to come, as the pairwise merge keeps its left side). Values the arrays cannot hold
    exactly (a NaN priority, an int past 64 bits, a hosts tuple not sorted and distinct)
    take the pairwise merge instead, with the same result as before.
    """
    cands = list(chain.from_iterable(groups))
    if not cands:
        return []
    try:
        return _combine_sorted(cands)
    except _NotVectorisable:
        folded = _fold_offers(cands)
        return [folded[fp] for fp in sorted(folded)]


class _NotVectorisable(Exception):
    """Values the arrays would not carry exactly: combine by ``Candidate.merge`` instead."""


def _fold_offers(cands: Iterable[Candidate]) -> dict[int, Candidate]:
    """The pairwise combine, offer by offer (the rules' definition)."""
    combined: dict[int, Candidate] = {}
    for cand in cands:
        kept = combined.get(cand.fp)
        combined[cand.fp] = cand if kept is None else kept.merge(cand)
    return combined


def fingerprints(cands: Sequence[Candidate]) -> np.ndarray:
    """The candidates' fingerprints as a uint64 array."""
    try:
        return np.fromiter((c.fp for c in cands), dtype=np.uint64, count=len(cands))
    except (OverflowError, TypeError, ValueError) as exc:
        raise _NotVectorisable(str(exc)) from exc


def _combine_sorted(cands: list[Candidate]) -> list[Candidate]:
    n = len(cands)
    fps = fingerprints(cands)
    order = np.argsort(fps, kind="stable")
    ordered = fps[order]
    first = np.ones(n, dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    if len(starts) == n:
        return [cands[i] for i in order.tolist()]
    sizes = np.diff(starts, append=n)
    out = [cands[i] for i in order[starts].tolist()]
    several = sizes > 1
    members = [cands[i] for i in order[np.repeat(several, sizes)].tolist()]
    for g, merged in zip(np.flatnonzero(several).tolist(), _merge_groups(members, sizes[several])):
        out[g] = merged
    return out


_INT_LIMIT = 1 << 62  # a sum of values each below _INT_LIMIT / count stays exact in int64


def _codes(values: Sequence[str]) -> np.ndarray:
    """Each string's rank among the distinct values (Python's string order)."""
    distinct = sorted(set(values))
    if len(distinct) == 1:
        return np.zeros(len(values), dtype=np.int64)
    rank = {v: i for i, v in enumerate(distinct)}
    return np.fromiter(map(rank.__getitem__, values), dtype=np.int64, count=len(values))


def _ints(values: Sequence[int]) -> np.ndarray:
    """Python ints as an int64 array whose every sum is exact (else :class:`_NotVectorisable`)."""
    try:
        arr = np.array(values, dtype=np.int64)
    except (OverflowError, TypeError, ValueError) as exc:
        raise _NotVectorisable(str(exc)) from exc
    limit = _INT_LIMIT // max(1, len(values))
    if arr.size and (int(arr.max()) >= limit or int(arr.min()) <= -limit):
        raise _NotVectorisable("an integer too large to add exactly")
    return arr


def _merge_groups(members: list[Candidate], sizes: np.ndarray) -> list[Candidate]:
    """The combined offer of each group of ``members`` (groups contiguous, ``sizes`` long,
    each in the order its offers came)."""
    m = len(members)
    bounds = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    last = bounds + sizes - 1
    group = np.repeat(np.arange(len(sizes)), sizes)
    later = -np.arange(m)  # ties go to the first offer: the pairwise merge keeps its left side
    # One list per field (transposing a list of field tuples costs ten times as much).
    prio = np.array([c.priority for c in members], dtype=np.float64)
    if not np.isfinite(prio).all():
        raise _NotVectorisable("a priority that does not order")
    best = np.lexsort((later, _codes([c.kind for c in members]), _codes([c.source for c in members]), prio, group))
    tops = [members[i] for i in best[last].tolist()]
    lastmod = [c.lastmod for c in members]
    if any(v is not None for v in lastmod):
        dated = np.array([v is not None for v in lastmod], dtype=bool)
        stamp = np.array([0.0 if v is None else v for v in lastmod], dtype=np.float64)
        if not np.isfinite(stamp).all():
            raise _NotVectorisable("a lastmod that does not order")
        stamps = [lastmod[i] for i in np.lexsort((later, stamp, dated, group))[last].tolist()]
    else:
        stamps = [None] * len(sizes)
    origins = [c.robots_origin for c in members]
    least_origin: list[str | None] = [None] * len(sizes)
    if any(origins):
        for g, (start, size) in enumerate(zip(bounds.tolist(), sizes.tolist())):
            named = [o for o in origins[start : start + size] if o]
            least_origin[g] = min(named) if named else None
    min_depth = np.minimum.reduceat(_ints([c.depth for c in members]), bounds).tolist()
    min_hops = np.minimum.reduceat(_ints([c.hops for c in members]), bounds).tolist()
    links = np.add.reduceat(_ints([c.inlinks for c in members]), bounds).tolist()
    united = _unite_hosts([c.inlink_hosts for c in members], group, len(sizes))
    heads = [members[i] for i in bounds.tolist()]
    return [
        Candidate(
            fp=head.fp, url=head.url, host=head.host, depth=depth, priority=top.priority, source=top.source,
            inlinks=n, inlink_hosts=hosts, kind=top.kind, hops=hops, lastmod=stamp, robots_origin=origin,
            not_before=hold,
        )
        for head, top, depth, n, hosts, hops, stamp, origin, hold in zip(
            heads, tops, min_depth, links, united, min_hops, stamps, least_origin, _later_holds(members, bounds, sizes)
        )
    ]  # fmt: skip


def _later_holds(members: list[Candidate], bounds: np.ndarray, sizes: np.ndarray) -> list[float | None]:
    """Per group, the latest hold of its members (``Candidate.merge``'s), None for none."""
    holds = [c.not_before for c in members]
    if all(h is None for h in holds):
        return [None] * len(sizes)
    out: list[float | None] = []
    for start, size in zip(bounds.tolist(), sizes.tolist()):
        kept: float | None = None
        for h in holds[start : start + size]:
            kept = later_hold(kept, h)
        out.append(kept)
    return out


def _unite_hosts(hosts: Sequence[tuple[int, ...]], group: np.ndarray, groups: int) -> list[tuple[int, ...]]:
    """Per group, the smallest :data:`MAX_INLINK_HOSTS` of its members' linking hosts."""
    lens = np.fromiter(map(len, hosts), dtype=np.int64, count=len(hosts))
    out: list[tuple[int, ...]] = [()] * groups
    total = int(lens.sum())
    if not total:
        return out
    for h in hosts:
        # The arrays agree with the pairwise merge for tuples it could have made itself.
        if len(h) > 1 and (len(h) > MAX_INLINK_HOSTS or any(a >= b for a, b in zip(h, h[1:]))):
            raise _NotVectorisable("a hosts tuple not sorted and distinct")
    try:
        flat = np.fromiter(chain.from_iterable(hosts), dtype=np.uint64, count=total)
    except (OverflowError, TypeError, ValueError) as exc:
        raise _NotVectorisable(str(exc)) from exc
    owner = np.repeat(group, lens)
    order = np.lexsort((flat, owner))
    flat, owner = flat[order], owner[order]
    fresh = np.ones(total, dtype=bool)
    fresh[1:] = (flat[1:] != flat[:-1]) | (owner[1:] != owner[:-1])
    flat, owner = flat[fresh], owner[fresh]
    first = np.searchsorted(owner, owner, side="left")
    keep = np.arange(len(owner)) - first < MAX_INLINK_HOSTS
    flat, owner = flat[keep].tolist(), owner[keep]
    ends = np.searchsorted(owner, np.arange(groups), side="right").tolist()
    start = 0
    for g, end in enumerate(ends):
        if end > start:
            out[g] = tuple(flat[start:end])
        start = end
    return out


def combine_blocks(blocks: Sequence[CandidateBlock]) -> CandidateBlock:
    """Combines blocks of offers per fingerprint, sorted by fingerprint, as columns: exactly
    what :func:`combine_candidates` gives for the blocks' candidates in the same order.

    One stable argsort of the fingerprints, then per fingerprint with several offers: the
    first offer's URL and host, ``np.minimum.reduceat`` for depth and hops, ``np.add.reduceat``
    for in-links, a ``lexsort`` for the best (priority, source, kind) and for the latest
    lastmod (ties to the first offer), the least robots.txt origin by rank, and the smallest
    :data:`MAX_INLINK_HOSTS` linking hosts, united in one sort. No ``Candidate`` is built.
    Blocks carrying objects, and values the arrays would not combine exactly (a NaN priority,
    an in-link sum past 64 bits, a hosts tuple not sorted and distinct), take
    :func:`combine_candidates` instead.
    """
    blocks = [b for b in blocks if len(b)]
    if not blocks:
        return CandidateBlock.empty()
    if all(b.columnar for b in blocks):
        try:
            combined = _combine_columns(CandidateBlock.concat(blocks))
        except _NotVectorisable:
            pass
        else:
            # The rows refer to their offers' buffers, the combined-away ones' too: laid out
            # anew once most of those are dead, a bundle holds what it keeps, not all it saw.
            if combined.buffered() > 2 * combined.used() + 4096:
                combined = combined.compact()
            return combined
    cands = [c for b in blocks for c in b.to_candidates()]
    return CandidateBlock.from_candidates(combine_candidates([cands]))


def _ranks(vocab: Sequence[str]) -> np.ndarray:
    """Each vocabulary entry's rank in Python's string order, and -1 last (for code -1)."""
    order = sorted(range(len(vocab)), key=vocab.__getitem__)
    rank = np.empty(len(vocab) + 1, dtype=np.int64)
    rank[order] = np.arange(len(vocab))
    rank[-1] = -1
    return rank


def _combine_columns(b: CandidateBlock) -> CandidateBlock:
    n = len(b)
    if n < 2 or bool((b.fp[1:] > b.fp[:-1]).all()):
        return b  # sorted, each fingerprint once: nothing to combine
    order = np.argsort(b.fp, kind="stable")
    ordered = b.fp[order]
    first = np.ones(n, dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    heads = order[starts]
    if len(starts) == n:
        return b.take(order)
    g = len(starts)
    sizes = np.diff(starts, append=n)
    last = starts + sizes - 1
    several = sizes > 1
    group = np.repeat(np.arange(g), sizes)
    in_several = several[group]
    later = -np.arange(n)  # ties go to the first offer: the pairwise merge keeps its left side
    prio = b.priority[order]
    if np.isnan(prio[in_several]).any():
        raise _NotVectorisable("a priority that does not order")
    links = b.inlinks[order]
    if in_several.any():
        most = max(int(links[in_several].max()), -int(links[in_several].min()))
        if most * int(sizes.max()) >= 1 << 63:
            raise _NotVectorisable("an in-link sum past 64 bits")
    # Linking hosts, each row's in the order the rows sorted to.
    lstart, lend = b.link_start[order], b.link_end[order]
    lens = lend - lstart
    flat = b.link_hosts[gather_index(lstart, lend)]
    owner = np.repeat(np.arange(n), lens)
    if len(flat):
        # The union agrees with the pairwise merge for tuples it could have made itself.
        unsorted = (flat[1:] <= flat[:-1]) & (owner[1:] == owner[:-1])
        if (lens[in_several] > MAX_INLINK_HOSTS).any() or in_several[owner[1:][unsorted]].any():
            raise _NotVectorisable("a hosts tuple not sorted and distinct")
    source, kind = b.source[order], b.kind[order]
    best = np.lexsort((later, _ranks(b.kinds)[kind], _ranks(b.sources)[source], prio, group))[last]
    stamp = b.lastmod[order]
    dated = ~np.isnan(stamp)
    latest = np.lexsort((later, np.where(dated, stamp, 0.0), dated, group))[last]
    # The least robots.txt origin that is not empty, where offers of several name one.
    origin = b.origin[order]
    rank = _ranks(b.origins)
    unnamed = len(b.origins) + 1
    rank[-1] = unnamed
    for i, o in enumerate(b.origins):
        if not o:
            rank[i] = unnamed
    least = np.minimum.reduceat(rank[origin], starts)
    code_of = np.full(unnamed + 1, -1, dtype=np.int64)
    named = rank[:-1] < unnamed
    code_of[rank[:-1][named]] = np.flatnonzero(named)
    origins = np.where(several, code_of[least], b.origin[heads])
    # Hosts: per group of several, the smallest MAX_INLINK_HOSTS of its offers' (their own
    # rows keep their tuples); the united ones are appended to the block's host buffer.
    pick = in_several[owner]
    united, united_owner = flat[pick], group[owner[pick]]
    link_start, link_end = b.link_start[heads], b.link_end[heads]
    link_hosts = b.link_hosts
    if len(united):
        at = np.lexsort((united, united_owner))
        united, united_owner = united[at], united_owner[at]
        fresh = np.ones(len(united), dtype=bool)
        fresh[1:] = (united[1:] != united[:-1]) | (united_owner[1:] != united_owner[:-1])
        united, united_owner = united[fresh], united_owner[fresh]
        keep = np.arange(len(united)) - np.searchsorted(united_owner, united_owner, side="left") < MAX_INLINK_HOSTS
        united, united_owner = united[keep], united_owner[keep]
        counts = np.bincount(united_owner, minlength=g)
        ends = np.cumsum(counts) + len(link_hosts)
        link_start = np.where(several, ends - counts, link_start)
        link_end = np.where(several, ends, link_end)
        link_hosts = np.concatenate([link_hosts, united])
    else:
        link_start = np.where(several, 0, link_start)
        link_end = np.where(several, 0, link_end)
    return b.take(heads).with_columns(
        depth=np.minimum.reduceat(b.depth[order], starts),
        hops=np.minimum.reduceat(b.hops[order], starts),
        inlinks=np.add.reduceat(links, starts),
        priority=prio[best],
        source=source[best],
        kind=kind[best],
        lastmod=stamp[latest],
        origin=origins,
        link_hosts=link_hosts,
        link_start=link_start,
        link_end=link_end,
    )


def bucket_blocks(ordered: CandidateBlock, bits: int) -> Iterator[tuple[int, CandidateBlock]]:
    """``(bucket, its block)`` of a block sorted by fingerprint, buckets in order: each
    bucket is a contiguous run of rows, cut where the top ``bits`` change (each laid out
    contiguously, so that it encodes without copying rows one by one)."""
    if not len(ordered):
        return
    ordered = ordered.compact()
    if bits == 0:
        yield 0, ordered
        return
    buckets = ordered.fp >> np.uint64(64 - bits)
    cuts = np.flatnonzero(buckets[1:] != buckets[:-1]) + 1
    starts = [0, *cuts.tolist()]
    ends = [*starts[1:], len(ordered)]
    for start, end in zip(starts, ends):
        yield int(buckets[start]), ordered.take(slice(start, end))


def fp_keys(fps: np.ndarray) -> list[bytes]:
    """The seen-set keys of the fingerprints (:func:`fp_key` of each)."""
    raw = fps.astype(">u8").tobytes()
    return [raw[i : i + 8] for i in range(0, len(raw), 8)]


def key_chunks(keys: Iterable[bytes], size: int = KEY_CHUNK) -> Iterator[list[bytes]]:
    """``keys`` in lists of at most ``size``."""
    it = iter(keys)
    while chunk := list(islice(it, size)):
        yield chunk


def seen_mask(sorted_fps: np.ndarray, stored: Iterable[Sequence[bytes]]) -> np.ndarray:
    """Which of the sorted fingerprints are among the stored keys (chunks of 8-byte keys,
    each chunk in any order; a key of another length matches nothing). Every chunk is read.

    Per chunk: its keys as one array (sorted, unless a scan's chunk already is), then the
    candidates within the chunk's first and last key placed among them by ``searchsorted``
    (a few comparisons per candidate, none per key beyond the conversion)."""
    seen = np.zeros(len(sorted_fps), dtype=bool)
    for chunk in stored:
        if not len(sorted_fps) or not chunk:
            continue
        if set(map(len, chunk)) <= {8}:
            raw = b"".join(chunk)
        else:
            raw = b"".join(k for k in chunk if len(k) == 8)
        if not raw:
            continue
        values = np.frombuffer(raw, dtype=">u8").astype(np.uint64)
        if len(values) > 1 and not (values[1:] >= values[:-1]).all():
            values = np.sort(values)
        lo = int(np.searchsorted(sorted_fps, values[0], side="left"))
        hi = int(np.searchsorted(sorted_fps, values[-1], side="right"))
        if lo == hi:
            continue
        within = sorted_fps[lo:hi]
        at = np.minimum(np.searchsorted(values, within), len(values) - 1)
        seen[lo:hi] |= values[at] == within
    return seen


def merge_unseen(sorted_candidates: Sequence[Candidate], stored_keys: Iterable[bytes]) -> list[Candidate]:
    """The candidates whose fingerprint is not among ``stored_keys``.

    The candidates are sorted by fingerprint; the keys (8-byte big-endian) come in any
    order and are read to their end (a scan's stream then closes by itself, rather than
    whenever the abandoned iterator is collected), a chunk at a time, each chunk placed
    among the candidates by ``searchsorted``.
    """
    seen = seen_mask(fingerprints(sorted_candidates), key_chunks(stored_keys))
    return [sorted_candidates[i] for i in np.flatnonzero(~seen).tolist()]


def host_vote(host: str) -> int:
    """A linking host as a 32-bit hash (``Candidate.inlink_hosts``)."""
    return mmh3.hash(host.encode(), seed=0x1A5, signed=False)


def lastmod_hint(cand: Candidate, cells: dict[str, bytes] | None, now_ms: int) -> FrontierEntry | None:
    """A revisit row for a known URL whose sitemap (or feed) says it changed since our last
    visit, or None.

    The claim is weighed by how often this URL's lastmod agreed with what visits saw
    (``sitemaps.LastmodTrust``, a Beta(1, 1) prior: 0.5 before any check): the row's
    priority is the URL's importance times the chance it changed given the claim. The row
    is due now and names the URL's scheduled row (``also_keys``), deleted once this one is
    fetched, so the hint moves the visit forward rather than adding one. A URL a redirect's
    Retry-After still holds (``u:hold``) is not moved before the hold: the row is due then,
    in the held visit's place (its key).
    """
    raw = (cells or {}).get(REVISIT_CELL)
    if cand.lastmod is None or not raw:
        return None
    try:
        state = RevisitState.from_dict(revisit_value(raw))
    except (ValueError, TypeError, AttributeError):  # a JSON cell of another shape
        return None
    now = now_ms / 1000.0
    scheduled = scheduled_key(cand.fp, state.to_dict(), now_ms)
    if scheduled is None or state.checked_at is None:
        return None  # dropped, never seen, or due anyway
    if lastmod_claim(cand.lastmod, 0.0, state.checked_at, now) is not True:
        return None
    trust = LastmodTrust(state.lastmod_agree, state.lastmod_disagree).score
    p_model = change_probability(state.lam, now - state.checked_at)
    due_ms = max(now_ms, held_until(cells) or 0)
    if due_ms >= due_of(scheduled):
        return None  # held past the scheduled visit: nothing comes sooner
    return FrontierEntry(
        url=cand.url, fp=cand.fp, host=cand.host, due_ms=due_ms,
        priority=state.importance * lastmod_change_probability(p_model, True, trust),
        source="revisit", reason="sitemap lastmod", lastmod=cand.lastmod, revisit=state.to_dict(),
        also_keys=[scheduled.hex()],
    )  # fmt: skip


def known_holds(known: Sequence[Candidate], rows: dict[bytes, dict[str, bytes]], now_ms: int) -> list[str]:
    """Staged hold lines (``frontier.hold_text``) of known URLs a redirect asks to wait for:
    each one's hold (the later of it and one its seen-set row notes, in ``rows`` by seen-set
    key: both are in force) and the frontier keys the row says its pending visit may be at.
    A hold already over by ``now_ms`` holds nothing."""
    lines = []
    for c in known:
        if c.not_before is None or not math.isfinite(c.not_before):
            continue
        due_ms = math.ceil(c.not_before * 1000)
        if not now_ms < due_ms < 1 << 63:
            continue
        cells = rows.get(fp_key(c.fp))
        due_ms = max(due_ms, held_until(cells) or 0)
        lines.append(hold_text(c.fp, Hold(due_ms, frozenset(pending_keys(c.fp, cells)))))
    return lines


def page_candidates(
    page: ParsedPage,
    shape: ShapeRules | None = None,
    rejected: MutableMapping[str, int] | None = None,
    max_redirects: int = MAX_REDIRECTS,
) -> list[Candidate]:
    """The URLs a parsed page offers to the frontier (links it may follow, redirects, and
    the sitemaps, feeds and listed URLs of robots.txt, sitemaps and feeds).

    Args:
        page: A parsed page.
        shape: URL-shape rules; a link failing one is not offered (None: no shape check).
        rejected: Where to count the links refused, by reason (:data:`urlshape.REASONS`,
            and ``redirect_hops`` for a chain over ``max_redirects``).
        max_redirects: Redirect hops a chain may take; the next target is not queued.
    """
    return [Candidate(*offer) for offer in page_offers(page, shape, rejected, max_redirects)]


def page_offers(
    page: ParsedPage,
    shape: ShapeRules | None = None,
    rejected: MutableMapping[str, int] | None = None,
    max_redirects: int = MAX_REDIRECTS,
) -> list[tuple[Any, ...]]:
    """:func:`page_candidates` as rows of each candidate's field values, in ``Candidate``'s
    field order (fp, url, host, depth, priority, source, inlinks, inlink_hosts, kind, hops,
    lastmod, robots_origin, not_before): what :meth:`CandidateBlock.from_rows` takes, no object made."""
    if page.duplicate_of and 200 <= page.fetch.status < 300:
        # A copy's links are its original's (or a mirror's echo of them): following them
        # would crawl the copied site twice. What is reachable otherwise is still found.
        # A redirect whose stub body is a copy still leads to its own Location.
        return []
    entry = page.fetch.entry
    depth = entry.depth + 1
    priority = link_priority(depth)
    own_host = entry.host
    vote: tuple[int, ...] | None = None
    out = []
    for url, fp, kind, host, lastmod in follow_rows(page.links, page.meta_nofollow):
        if kind == "canonical":
            continue  # a hint about this page, not a new page to crawl
        if kind == "redirect" and not redirect_allowed(entry.hops + 1, max_redirects):
            if rejected is not None:
                rejected["redirect_hops"] = rejected.get("redirect_hops", 0) + 1
            continue
        if shape is not None:
            reason = shape.check(url)
            if reason == "binary_extension" and (
                kind in ("sitemap", "feed") or (kind == "redirect" and entry.kind == "sitemap")
            ):
                reason = None  # a sitemap may be gzipped (sitemap.xml.gz): read, not archived
            if reason is not None:
                if rejected is not None:
                    rejected[reason] = rejected.get(reason, 0) + 1
                continue
        if not host:
            try:
                host = host_of(url)
            except ValueError:
                continue
        if kind in ("sitemap", "feed"):
            # A document to read for URLs. One named by robots.txt is an entry point
            # (depth 0) that may list its origin's URLs wherever it is kept: the origin whose
            # robots.txt it is (the fetcher's entry says), not the host a redirect of it led
            # to, where the file may be anyone's upload.
            from_robots = entry.source == "robots"
            out.append((
                fp, url, host, 0 if from_robots else depth, priority,
                "sitemap" if kind == "sitemap" else "feed", 1, (), "sitemap", 0, lastmod,
                (entry.robots_origin or origin(page.fetch.url)) if from_robots else entry.robots_origin, None,
            ))  # fmt: skip
            continue
        if kind == "listed":
            # A URL a sitemap or feed lists: the site vouches for it, as an entry point.
            source = "feed" if entry.source == "feed" else "sitemap"
            out.append((fp, url, host, 0, importance(0, source, 0), source, 1, (), "page", 0, lastmod, None, None))
            continue
        hosts: tuple[int, ...] = ()
        if host != own_host and kind != "redirect":
            if vote is None:
                vote = (host_vote(own_host),)
            hosts = vote
        if kind == "redirect":
            # The target is what the source was: a moved sitemap or feed is still read for URLs.
            # A Retry-After sent with the redirect is the least wait before the redirected
            # request (RFC 9110 §10.2.3): the target is queued due when it ends.
            fetch = page.fetch
            hold = redirect_hold(fetch.status, fetch.header("retry-after"), fetch.fetched_at + fetch.elapsed)
            out.append((
                fp, url, host, entry.depth, max(priority, min(1.0, entry.priority)), "redirect", 1, (),
                entry.kind, entry.hops + 1, None, entry.robots_origin, hold or None,
            ))  # fmt: skip
            continue
        out.append((fp, url, host, depth, priority, "link", 1, hosts, "page", 0, None, None, None))
    return out


class _CandidatesFn(beam.DoFn):
    """A batch of pages' followable links of an acceptable shape, as one list (none if
    empty); a page that fails is its own dead letter and offers nothing."""

    def __init__(self, shape: ShapeRules | None, max_redirects: int) -> None:
        self.shape = shape
        self.max_redirects = max_redirects
        self.refused = {r: Metrics.counter("url_seen", f"shape_{r}") for r in (*REASONS, "redirect_hops")}
        self.dead = Outlet("url_seen")

    def process(self, batch: PageBatch) -> Iterator[Any]:
        found: list[tuple[Any, ...]] = []
        rejected: dict[str, int] = {}
        for page in batch.pages:
            refused: dict[str, int] = {}
            try:
                self.dead.check(page)
                found.extend(page_offers(page, self.shape, refused, self.max_redirects))
            except Exception as exc:  # this page's letter; the batch's others go on
                yield self.dead.tagged(exc, page)
                continue
            for reason, n in refused.items():  # a failed page's refusals are not counted
                rejected[reason] = rejected.get(reason, 0) + n
        for reason, n in rejected.items():
            self.refused[reason].inc(n)
        if not found:
            return
        try:
            # The batch's offers as columns: no Candidate made for the many known URLs.
            block = CandidateBlock.from_rows(found)
        except Exception as exc:  # a fingerprint no column holds: as objects, each its own letter
            if dead_letter.is_infrastructure(exc):
                raise
            yield Batched(Candidate(*offer) for offer in found)
        else:
            yield block


class ExtractCandidates(beam.PTransform):
    """``PageBatch`` → one ``CandidateBlock`` of offers per batch (links travel together, as
    columns; a list of ``Candidate`` where a fingerprint does not fit one).

    Args:
        shape: URL-shape rules links must pass (``CrawlConfig.shape_rules()``); None
            offers every followable link.
    """

    def __init__(self, shape: ShapeRules | None = None, max_redirects: int = MAX_REDIRECTS) -> None:
        super().__init__()
        self.shape = shape
        self.max_redirects = max_redirects

    def expand(self, pages: beam.PCollection) -> beam.PCollection:
        out = pages | "Followable links of a sane shape" >> beam.ParDo(
            _CandidatesFn(self.shape, self.max_redirects)
        ).with_output_types(CandidateBlock).with_outputs(ERRORS, main="candidates")
        collect(out[ERRORS])
        return out.candidates


class _BucketFn(beam.DoFn):
    """Combines a bundle's candidates per fingerprint; emits one block per bucket
    (:class:`~beamcrawl.schemas.candidate_block.CandidateBlock`: columns, not objects), and
    the blocks so far whenever :data:`COMBINE_AT_MOST` fingerprints are held (a local
    runner's bundle may hold a whole round: what it holds must not grow with it). The merge
    combines offers of one fingerprint from any number of blocks, in any order, to the same
    row (``Candidate.merge``), so where the blocks are cut changes nothing but their count.

    Offers wait uncombined until they are as many as the combined ones held (at least
    :data:`COMBINE_BATCH`), then all are combined at once (:func:`combine_blocks`): each
    offer is combined a few times at most, and at most ``2 × COMBINE_AT_MOST`` are held.
    An element may be a list of any length (a page's links, or a batch of pages'), or a
    ``CandidateBlock`` of them (what ``ExtractCandidates`` gives)."""

    def __init__(self, bits: int, staging: str | None = None) -> None:
        self.bits = bits
        self.staging = staging
        self.received = Metrics.counter("url_seen", "offered")
        self.spilled = Metrics.counter("url_seen", "block_bytes_set_aside")
        self.dead = Outlet("url_seen")

    def start_bundle(self) -> None:
        self.held = CandidateBlock.empty()  # combined, sorted by fingerprint
        self.pending: list[Candidate] = []  # offers not combined yet, as objects
        self.pending_blocks: list[CandidateBlock] = []  # and as columns
        self.pending_rows = 0  # offers in the pending blocks

    def process(self, candidates: CandidateBlock | list[Candidate]) -> Iterator[Any]:
        self.received.inc(len(candidates))
        if isinstance(candidates, CandidateBlock) and not self.dead.faulty():
            self.pending_blocks.append(candidates)  # fingerprints checked where it was made
            self.pending_rows += len(candidates)
        else:
            # Offers as objects, or a test's injected faults (checked offer by offer).
            offers = candidates.to_candidates() if isinstance(candidates, CandidateBlock) else candidates
            for cand in offers:
                try:
                    self.dead.check(cand)
                except Exception as exc:
                    yield self.dead.tagged(exc, cand)
                    continue
                self.pending.append(cand)
        if len(self.pending) + self.pending_rows >= max(len(self.held), min(COMBINE_BATCH, COMBINE_AT_MOST)):
            yield from self._combine()
            if len(self.held) >= COMBINE_AT_MOST:
                yield from self._blocks()

    def _combine(self, windowed: bool = False) -> Iterator[Any]:
        """Folds the pending offers into the held ones. An offer whose fingerprint is not a
        64-bit int is a dead letter. Should the combine fail, the offers are merged one by
        one (``Candidate.merge``), and one that will not merge is a dead letter."""
        pending, self.pending = self.pending, []
        blocks, self.pending_blocks, self.pending_rows = self.pending_blocks, [], 0
        letter = self.dead.windowed if windowed else self.dead.tagged
        try:
            block = CandidateBlock.from_candidates(pending)
        except Exception as exc:
            if dead_letter.is_infrastructure(exc):
                raise
            good = []
            for cand in pending:
                try:
                    CandidateBlock.from_candidates([cand])
                    good.append(cand)
                except Exception as exc:
                    yield letter(exc, cand)
            pending = good
            block = CandidateBlock.from_candidates(pending)
        try:
            self.held = combine_blocks([self.held, *blocks, block])
            return
        except Exception as exc:
            if dead_letter.is_infrastructure(exc):
                raise
        folded = {c.fp: c for c in self.held.to_candidates()}
        for cand in [c for b in blocks for c in b.to_candidates()] + pending:
            try:
                kept = folded.get(cand.fp)
                folded[cand.fp] = cand if kept is None else kept.merge(cand)
            except Exception as exc:
                yield letter(exc, cand)
        self.held = CandidateBlock.from_candidates([folded[fp] for fp in sorted(folded)])

    def _blocks(self) -> Iterator[tuple[int, CandidateBlock | SpanRef]]:
        held, self.held = self.held, CandidateBlock.empty()
        if self.staging is None:
            yield from bucket_blocks(held, self.bits)
            return
        # Set aside: every bucket's block in one span file, only its span crosses the shuffle.
        buckets: list[int] = []

        def encoded() -> Iterator[bytes]:
            for bucket, block in bucket_blocks(held, self.bits):
                buckets.append(bucket)
                yield block.encode()

        refs = write_spans(self.staging, encoded())
        self.spilled.inc(sum(ref.length for ref in refs))
        yield from zip(buckets, refs)

    def finish_bundle(self) -> Iterator[Any]:
        yield from self._combine(windowed=True)
        for kv in self._blocks():
            yield GlobalWindows.windowed_value(kv)


def bucket_lists(ordered: Sequence[Candidate], bits: int) -> Iterator[tuple[int, Packed]]:
    """``(bucket, its candidates)`` of candidates sorted by fingerprint, buckets in order:
    each bucket is a contiguous run of them, cut where the top ``bits`` change."""
    if not ordered:
        return
    if bits == 0:
        yield 0, Packed(ordered)
        return
    buckets = fingerprints(ordered) >> np.uint64(64 - bits)
    cuts = np.flatnonzero(buckets[1:] != buckets[:-1]) + 1
    starts = [0, *cuts.tolist()]
    ends = [*starts[1:], len(ordered)]
    for start, end in zip(starts, ends):
        yield int(buckets[start]), Packed(ordered[start:end])


class _MergeBucketFn(beam.DoFn):
    """Merges one bucket's blocks against the seen set, by scan or by key set.

    The blocks are combined as columns (:func:`combine_blocks`); should that or the merge
    fail (not the store), the bucket's candidates are merged as objects, alone where
    together they fail, so that one bad candidate is one dead letter."""

    def __init__(
        self,
        store_uri: str,
        bits: int,
        now_ms: int,
        seen_rows: int,
        keyset_cost_ratio: float,
        path: JoinPath,
        lastmod_hints: bool = True,
        staging: str | None = None,
        holds_staging: str | None = None,
    ) -> None:
        self.store_uri = store_uri
        self.staging = staging
        self.holds_staging = holds_staging
        self.lastmod_hints = lastmod_hints
        self.hints = Metrics.counter("url_seen", "lastmod_hints")
        self.held = Metrics.counter("url_seen", "known_held")
        self.bits = bits
        self.now_ms = now_ms
        self.join = StoreJoin("urls", "url_seen", seen_rows, keyset_cost_ratio, path, keys_only=True)
        self.buckets = Metrics.counter("url_seen", "buckets")
        self.distinct = Metrics.counter("url_seen", "distinct")
        self.new = Metrics.counter("url_seen", "new")
        self.bucket_bits = Metrics.distribution("url_seen", "bucket_bits")
        self.dead = Outlet("url_seen")

    def setup(self) -> None:
        gctune.tune()
        self.store = open_store(self.store_uri)

    def process(self, element: tuple[int, Iterable[CandidateBlock | SpanRef]]) -> Iterator[Any]:
        _, groups = element
        blocks = self._read(list(groups))
        try:
            out = self._merge_blocks(blocks)
        except Exception as exc:
            if dead_letter.is_infrastructure(exc):
                raise
            # One bad candidate must not cost the bucket's others: each merges them alone then.
            out = []
            cands = [cand for block in blocks for cand in block.to_candidates()]
            letters = dead_letter.each(self.dead, cands, lambda part: out.extend(self._merge(part)))
            yield from out
            for letter in letters:
                yield beam.pvalue.TaggedOutput(ERRORS, letter)
            return
        yield from out

    def _read(self, items: list[Any]) -> list[CandidateBlock]:
        """The bucket's blocks: as they came, or read back from their span files. A file
        that will not read, or a block that will not decode, is the round's own output gone
        bad: an infrastructure failure (``OSError``), the round is redone."""
        if self.staging is None:
            return items
        blocks = []
        for data in read_spans(self.staging, items):
            try:
                blocks.append(CandidateBlock.decode(data))
            except ValueError as exc:
                raise OSError(errno.EIO, f"a set-aside candidate block does not decode: {exc}") from exc
        return blocks

    def _merge_blocks(self, blocks: Sequence[CandidateBlock]) -> list[QueuedUrls | Packed]:
        """The bucket's blocks combined as columns and merged with the seen set; only the
        new candidates (and the known dated ones the lastmod hints read) become objects."""
        merged = combine_blocks(blocks)
        if not len(merged):
            return []
        seen = self._seen(merged.fp)
        # The new URLs' rows made from the columns: no Candidate or FrontierEntry a URL.
        new = queue_new_block(self.store, merged, np.flatnonzero(~seen), self.now_ms)
        self.new.inc(len(new))
        if self.lastmod_hints:
            self._queue_hints(merged.to_candidates(np.flatnonzero(seen & merged.dated())))
        if not merged.columnar:  # only objects carry a hold
            self._stage_holds(merged.to_candidates(np.flatnonzero(seen)))
        # One element per bucket, not per URL, its entries made only if read: the round does
        # not read them.
        return [new if isinstance(new, QueuedUrls) else Packed(new)]

    def _seen(self, fps: np.ndarray) -> np.ndarray:
        """Which of the bucket's sorted fingerprints the seen set holds (counted)."""
        # Only the keys from the first candidate's to the last's can match: the scan
        # covers that span of the bucket's range, and the cost estimate counts its keys.
        span = (int(fps[-1]) - int(fps[0]) + 1) / float(1 << 64)
        seen = seen_mask(fps, self.join.key_chunks(self.store, fp_keys(fps), span))
        self.buckets.inc()
        self.bucket_bits.update(self.bits)
        self.distinct.inc(len(fps))
        return seen

    def _merge(self, cands: Sequence[Candidate]) -> list[Packed]:
        """The object path, for candidates the columns would not merge: combined by
        :func:`combine_candidates`, then the same merge."""
        ordered = combine_candidates([cands])
        seen = self._seen(fingerprints(ordered))
        new = queue_new_urls(self.store, [ordered[i] for i in np.flatnonzero(~seen).tolist()], self.now_ms)
        self.new.inc(len(new))
        known = [ordered[i] for i in np.flatnonzero(seen).tolist()]
        if self.lastmod_hints:
            self._queue_hints(known)
        self._stage_holds(known)
        return [Packed(new)]

    def _stage_holds(self, known: Sequence[Candidate]) -> None:
        """Known URLs a redirect asks to wait for: one key-set read of their seen-set rows,
        then their holds staged for the commit, which moves their pending visits (it alone
        knows which of them this round fetched, and their next visits)."""
        held = [c for c in known if c.not_before is not None]
        if not held or self.holds_staging is None:
            return
        rows = self.store.read_keys("urls", [fp_key(c.fp) for c in held])
        lines = known_holds(held, rows, self.now_ms)
        if lines:
            # Under its name only once whole: a worker that dies writing leaves no part line.
            out = files.PiecewiseFile(files.join(self.holds_staging, part_name(".txt")))
            out.write(("\n".join(lines) + "\n").encode("ascii"))
            out.close()
            self.held.inc(len(lines))

    def _queue_hints(self, known: Sequence[Candidate]) -> None:
        """Known URLs a sitemap dates after our last visit: one key-set read of their state,
        then a revisit row each where the claim is worth acting on."""
        dated = [c for c in known if c.lastmod is not None]
        if not dated:
            return
        rows = self.store.read_keys("urls", [fp_key(c.fp) for c in dated])
        hints = [h for c in dated if (h := lastmod_hint(c, rows.get(fp_key(c.fp)), self.now_ms)) is not None]
        if hints:
            self.store.mutate("frontier", [Mutation.set(h.key, h.to_cells()) for h in hints])
            self.hints.inc(len(hints))

    def teardown(self) -> None:
        self.store.close()


class QueueUnseenUrls(beam.PTransform):
    """Lists of candidates → per bucket, a list of the ``FrontierEntry`` of every URL never
    seen before, which it marks seen and queues: it writes the seen set and the frontier.

    Args:
        store_uri: The crawl's store.
        bits: At least ``2**bits`` fingerprint buckets; more when the seen set is large
            (see :func:`choose_bucket_bits`).
        now_ms: Due time of the new frontier rows.
        max_bits: At most ``2**max_bits`` buckets (pass ``bits`` to fix the count).
        path: ``"auto"`` picks scan or key set per bucket by cost; ``"scan"`` or
            ``"keyset"`` forces one.
        staging: A folder of the round's staging: the blocks wait for the merge there, in
            span files, and only their spans cross the shuffle. None: the blocks cross it.
        seen_rows: The seen set's size; default the store's estimate, read once here,
            at pipeline construction.
        candidates: Expected distinct offers this round, if known (sizes buckets too).
        keyset_cost_ratio: Cost of a key-set read per key, in scanned keys; default the
            store's ``keyset_cost_ratio``.
        lastmod_hints: Queue a revisit of a known URL whose sitemap dates it after our last
            visit (:func:`lastmod_hint`).
        holds_staging: A folder of the round's staging where the holds of known URLs a
            redirect's Retry-After asks to wait for are staged (:func:`known_holds`), for the
            commit to move their visits. None: a known URL's visit stays as it is.
    """

    def __init__(
        self,
        store_uri: str,
        bits: int,
        now_ms: int,
        *,
        max_bits: int = MAX_BUCKET_BITS,
        path: JoinPath = "auto",
        seen_rows: int | None = None,
        candidates: int | None = None,
        keyset_cost_ratio: float | None = None,
        lastmod_hints: bool = True,
        staging: str | None = None,
        holds_staging: str | None = None,
    ) -> None:
        super().__init__()
        self.lastmod_hints = lastmod_hints
        self.staging = staging
        self.holds_staging = holds_staging
        if path not in ("auto", "scan", "keyset"):
            raise ValueError(f"path must be auto, scan or keyset, got {path!r}")
        self.store_uri = store_uri
        self.min_bits = bits
        self.max_bits = max(bits, max_bits)
        self.now_ms = now_ms
        self.path = path
        self.seen_rows = seen_rows
        self.candidates = candidates
        self.keyset_cost_ratio = keyset_cost_ratio
        self.bits = bits  # the chosen count, set by expand()

    def _size(self) -> None:
        """Reads what sizing needs from the store, once, when the pipeline is built."""
        if self.seen_rows is not None and self.keyset_cost_ratio is not None:
            return
        with open_store(self.store_uri) as store:
            if self.seen_rows is None:
                self.seen_rows = store.estimate_rows("urls")
            if self.keyset_cost_ratio is None:
                self.keyset_cost_ratio = float(store.keyset_cost_ratio)

    def expand(self, candidate_lists: beam.PCollection) -> beam.PCollection:
        self._size()
        assert self.seen_rows is not None and self.keyset_cost_ratio is not None
        self.bits = choose_bucket_bits(self.seen_rows, self.candidates, min_bits=self.min_bits, max_bits=self.max_bits)
        merge = _MergeBucketFn(
            self.store_uri,
            self.bits,
            self.now_ms,
            self.seen_rows,
            self.keyset_cost_ratio,
            self.path,
            self.lastmod_hints,
            self.staging,
            self.holds_staging,
        )
        buckets = candidate_lists | "Combine per fingerprint, bucket by top bits" >> beam.ParDo(
            _BucketFn(self.bits, self.staging)
        ).with_output_types(tuple[int, CandidateBlock if self.staging is None else Any]).with_outputs(
            ERRORS, main="buckets"
        )
        collect(buckets[ERRORS])
        new = (
            buckets.buckets
            | "Group by fingerprint bucket" >> beam.GroupByKey()
            | "Sort-merge with seen set" >> beam.ParDo(merge).with_outputs(ERRORS, main="new")
        )
        collect(new[ERRORS])
        return new.new
