"""URL seen? DRUM-style: batched sort-merge of discovered URLs against the seen set.

Discovered URLs arrive normalised and fingerprinted (64-bit, from the parse stage), one
element per page. Each bundle combines them per fingerprint (in-link counts add up) and
emits one list per fingerprint bucket — the fingerprint's top bits, so a bucket is one
contiguous key range of the seen set. After a ``GroupByKey`` on bucket, each bucket's
candidates are sorted and merged in one sequential pass against the sorted keys of its
range (a keys-only range scan). No per-URL lookups anywhere. Only never-seen URLs join the
frontier, and they are queued (frontier row written) before they are marked seen, so a
crash between the two writes loses nothing.

Governed by: --seen-bucket-bits (2^bits buckets).
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from beamcrawl.core.urlnorm import host_of
from beamcrawl.schemas.records import Candidate, FrontierEntry, ParsedPage, UrlState, fp_key
from beamcrawl.stores.base import Mutation, Store, open_store

__all__ = [
    "ExtractCandidates",
    "FilterSeenUrls",
    "bucket_of",
    "bucket_range",
    "combine_candidates",
    "merge_unseen",
    "queue_new_urls",
]

WRITE_BATCH = 2000


def link_priority(depth: int) -> float:
    """Breadth first by default: each hop from a seed halves the priority."""
    return max(0.5 ** depth, 1e-3)


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


def combine_candidates(groups: Iterable[Iterable[Candidate]]) -> dict[int, Candidate]:
    """Combines offers per fingerprint: in-links add up, the best priority wins."""
    combined: dict[int, Candidate] = {}
    for group in groups:
        for cand in group:
            kept = combined.get(cand.fp)
            combined[cand.fp] = cand if kept is None else kept.merge(cand)
    return combined


def merge_unseen(sorted_candidates: Sequence[Candidate], stored_keys: Iterable[bytes]) -> Iterator[Candidate]:
    """Yields the candidates whose fingerprint is not among ``stored_keys``.

    Both inputs are sorted by fingerprint (keys are 8-byte big-endian, so byte order is
    numeric order); one sequential pass over each, like a merge join.
    """
    keys = iter(stored_keys)
    current = next(keys, None)
    for cand in sorted_candidates:
        target = fp_key(cand.fp)
        while current is not None and current < target:
            current = next(keys, None)
        if current == target:
            continue
        yield cand


def queue_new_urls(store: Store, new: Sequence[Candidate], now_ms: int) -> list[FrontierEntry]:
    """Queues never-seen URLs, then marks them seen (in that order: crash-safe)."""
    entries = [
        FrontierEntry(
            url=c.url,
            fp=c.fp,
            host=c.host,
            due_ms=now_ms,
            priority=c.priority,
            depth=c.depth,
            source=c.source,
            inlinks=c.inlinks,
        )
        for c in new
    ]
    for i in range(0, len(entries), WRITE_BATCH):
        batch = entries[i : i + WRITE_BATCH]
        store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for e in batch])
        store.mutate(
            "urls",
            [
                Mutation.set(
                    fp_key(e.fp),
                    UrlState(url=e.url, first_seen_ms=now_ms, source=e.source, depth=e.depth).to_cells(),
                )
                for e in batch
            ],
        )
    return entries


def page_candidates(page: ParsedPage) -> list[Candidate]:
    """The URLs a parsed page offers to the frontier (links it may follow, redirects)."""
    depth = page.fetch.entry.depth + 1
    priority = link_priority(depth)
    out = []
    for link in page.follow_links:
        if link.kind == "canonical":
            continue  # a hint about this page, not a new page to crawl
        try:
            host = host_of(link.url)
        except ValueError:
            continue
        source = "redirect" if link.kind == "redirect" else "link"
        out.append(Candidate(fp=link.fp, url=link.url, host=host, depth=depth, priority=priority, source=source))
    return out


class ExtractCandidates(beam.PTransform):
    """``ParsedPage`` → one list of ``Candidate`` per page (links travel together)."""

    def expand(self, pages: beam.PCollection) -> beam.PCollection:
        return (
            pages
            | "Followable links" >> beam.Map(page_candidates)
            | "Drop pages without links" >> beam.Filter(bool)
        )


class _BucketFn(beam.DoFn):
    """Combines a bundle's candidates per fingerprint; emits one list per bucket."""

    def __init__(self, bits: int) -> None:
        self.bits = bits
        self.received = Metrics.counter("url_seen", "offered")

    def start_bundle(self) -> None:
        self.combined: dict[int, Candidate] = {}

    def process(self, candidates: list[Candidate]) -> None:
        self.received.inc(len(candidates))
        combined = self.combined
        for cand in candidates:
            kept = combined.get(cand.fp)
            combined[cand.fp] = cand if kept is None else kept.merge(cand)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        buckets: dict[int, list[Candidate]] = {}
        for cand in self.combined.values():
            buckets.setdefault(bucket_of(cand.fp, self.bits), []).append(cand)
        self.combined = {}
        for bucket, cands in buckets.items():
            yield WindowedValue((bucket, cands), MIN_TIMESTAMP, [GlobalWindow()])


class _MergeBucketFn(beam.DoFn):
    """Sort-merges one bucket's candidates against the seen set's keys of its range."""

    def __init__(self, store_uri: str, bits: int, now_ms: int) -> None:
        self.store_uri = store_uri
        self.bits = bits
        self.now_ms = now_ms
        self.buckets = Metrics.counter("url_seen", "buckets")
        self.distinct = Metrics.counter("url_seen", "distinct")
        self.new = Metrics.counter("url_seen", "new")
        self.scanned = Metrics.counter("url_seen", "keys_scanned")

    def setup(self) -> None:
        self.store = open_store(self.store_uri)

    def process(self, element: tuple[int, Iterable[list[Candidate]]]) -> Iterator[FrontierEntry]:
        bucket, groups = element
        combined = combine_candidates(groups)
        ordered = sorted(combined.values(), key=lambda c: c.fp)
        start, end = bucket_range(bucket, self.bits)

        def keys() -> Iterator[bytes]:
            for key, _ in self.store.read_range("urls", start, end, keys_only=True):
                self.scanned.inc()
                yield key

        new = list(merge_unseen(ordered, keys()))
        self.buckets.inc()
        self.distinct.inc(len(ordered))
        self.new.inc(len(new))
        yield from queue_new_urls(self.store, new, self.now_ms)

    def teardown(self) -> None:
        self.store.close()


class FilterSeenUrls(beam.PTransform):
    """Lists of candidates → ``FrontierEntry`` for every URL never seen before (now queued)."""

    def __init__(self, store_uri: str, bits: int, now_ms: int) -> None:
        super().__init__()
        self.store_uri = store_uri
        self.bits = bits
        self.now_ms = now_ms

    def expand(self, candidate_lists: beam.PCollection) -> beam.PCollection:
        return (
            candidate_lists
            | "Combine per fingerprint, bucket by top bits" >> beam.ParDo(_BucketFn(self.bits))
            | "Group by fingerprint bucket" >> beam.GroupByKey()
            | "Sort-merge with seen set" >> beam.ParDo(_MergeBucketFn(self.store_uri, self.bits, self.now_ms))
        )
