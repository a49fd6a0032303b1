"""Content seen? Exact copies by checksum, near copies by simhash, each found by a batched
sort-merge join against what the crawl already keeps (docs/ARCHITECTURE.md §1 step 7).

Every fetched page with a 2xx payload is checked; HTML pages also by their text:

1. **Exact copies.** The payload's 64-bit checksum (mmh3) is looked up in the content-seen
   set, the ``content`` table keyed by the 8-byte checksum, the way URL seen works
   (``url_seen.py``): one element per checksum bucket per bundle, a ``GroupByKey`` on the
   bucket, then one sorted merge of the bucket's checksums against the stored keys of its
   range (a key-set read or a range scan, whichever costs less). A stored checksum names the
   page that holds those bytes: every other page with them is its copy. A checksum seen for
   the first time may be shared by several pages of this round; exactly one of them, the
   first by :func:`order_key`, goes on as the candidate original, and the others are its
   copies.
2. **Near copies.** Each new candidate's simhash (``core/content/textfp.py``) is looked up in the
   permuted tables of the ``simhash`` table, ten or twenty as the store recorded when its first
   round chose (``state/simhash_layout.py``: ten on the embedded store, twenty on Bigtable):
   for table ``t`` its row key is the table byte and the leading bits of the permuted
   fingerprint (25–26 of ten tables, 31–33 of twenty), so any stored fingerprint within 3
   bits shares that row in at least one table. Candidates are bucketed by (table, top bits
   of the permuted fingerprint), grouped, sorted, and merged against the stored rows of
   their keys in one pass; every fingerprint in a shared row is checked for a Hamming distance of at most
   3, and so is every pair of this round's candidates that share a row. A candidate crosses
   that shuffle once a group of tables, so it goes by its simhash and 8-byte URL fingerprint
   only, never its URL, and its evidence is combined per URL fingerprint. The search's
   functions and records are :mod:`beamcrawl.transforms.near_copies`; this module wires them.
3. **One original, deterministically.** A page is a near copy when it is within 3 bits of an
   original kept in an earlier round, or of an original of this round that comes first by
   :func:`~beamcrawl.transforms.near_copies.order_key` (a URL without a query first, then the
   shorter, then the smaller). This round's pairs are few (only real near copies share a row and pass the check), so they are
   named (their URLs looked up where the new content is, their fingerprints joined to it by
   part) and resolved in one place, in that order: the result depends only on the
   round's pages, not on fetch timing or bundle boundaries, and a rerun of a round decides
   the same. Two URLs of one round with one 64-bit fingerprint share one name and one
   decision (which may then be wrong for one of them); nothing fails.
4. **Record.** After the decision, each new checksum is written to ``content`` (naming the
   original, or for a near copy the page it is near) and each new original's simhash to its
   row of every table of ``simhash``. Rows carry the round that wrote them; rows of this
   round or a later one are ignored, so a rerun of a crashed round decides afresh rather
   than from its own half-written decisions.

A copy comes out with ``duplicate_of`` (the original's URL), ``duplicate_kind`` (``exact`` or
``near``) and ``duplicate_distance``; an exact copy of a page kept in an earlier round also
with ``original_fetched_at`` and ``original_digest`` for its WARC revisit record. A page that
finds its own URL in the content-seen set is the same page unchanged, not a copy. Pages that
are not fetched 2xx payloads pass through unchanged; non-HTML payloads (PDFs...) get the
exact check only.

Stored rows: the ``content`` and ``simhash`` tables (:mod:`beamcrawl.state.content_rows`, which
writes and reads them).

At scale. Pages themselves are never shuffled: the joins carry small probes (URL, checksum,
simhash, date, digest, the batch the page waits in; a bucket's as one
:class:`~beamcrawl.schemas.probe_block.ProbeBlock` of columns, about 90 bytes a probe), and
the decisions reach the pages by a join on the batch: each copy (about 150 bytes) is sent to
the batch its page waits in, so no worker holds the round's copies at once (a side input
would: every worker, all of them). The one step that sees the whole round at once is the in-round
resolution, and it holds only this round's candidates that are near each other and near no
stored original; a row shared by more than
:data:`~beamcrawl.transforms.near_copies.MAX_PAIRWISE` candidates (a trap serving one text over
and over) is checked against its first originals, not pair by pair: such a
row crosses to the resolution as its members' fingerprints, and is checked there, in URL
order, once its members are named.

The pages themselves must wait for those decisions. With ``staging`` (the round's), they
wait on disk: written where they are parsed to bounded batch files
(:mod:`beamcrawl.core.runtime.batch_files`), their probes made on the way, each naming its
page's file; a file is read back once its copies are known (a ``CoGroupByKey`` on the file's
name of its reference and its copies). What waits in the runner is a reference of a few
dozen bytes per ~1,000 pages, so the round's memory does not grow with its pages. Each file
comes out of "Mark copies" as one :class:`~beamcrawl.schemas.records.PageBatch`, and the stages after it take
batches: one DoFn call per ~1,000 pages per stage, not one per page. The new checksums wait
for the near copies the same way (``new_staging``): every 2,000 of a bundle go to a span
file, one span per part (:func:`near_part`, the top bits of the candidate's URL
fingerprint), and a part's spans are joined (a ``CoGroupByKey`` on the part) with its
pending pairs, to name them, and with its near decisions, to settle: a worker holds one
part's decisions, and content seen reads no side input. What crosses the table-bucket
shuffle is a bundle's ``(simhash, url fingerprint)`` pairs of a bucket as one block of
16-byte items, a bucket serving every table whose permuted fingerprints begin with the same
bits (four groups of the ten or twenty tables), so that a candidate crosses four times, not
once a table.

Governed by: the bucket bits (at least 2^bits buckets, more when the content-seen set is
large), ``path`` (scan / keyset / auto), and the round number.
"""

from __future__ import annotations

import pickle
import uuid
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)

import apache_beam as beam
import numpy as np
from apache_beam.metrics import Metrics
from apache_beam.transforms.window import GlobalWindows
from apache_beam.utils.windowed_value import WindowedValue

from beamcrawl.core.archive.warc_revisit import fetch_digest
from beamcrawl.core.content import textfp
from beamcrawl.core.content.htmlparse import checksum as payload_checksum
from beamcrawl.core.runtime.batch_files import BatchRef, BatchWriter, SpanRef, read_batch, read_spans, write_spans
from beamcrawl.core.urls.urlnorm import fingerprint
from beamcrawl.schemas.probe_block import ProbeBlock
from beamcrawl.schemas.records import Packed, PageBatch, ParsedPage, Probe, evolve, fp_key, shuffled
from beamcrawl.state.content_rows import (
    CONTENT_TABLE,
    SIMHASH_TABLE,
    ContentRecord,
    counts_in_round,
    name_key,
    names_from_rows,
    read_content_rows,
    simhash_row_cells,
    sorted_cells,
    sorted_run,
)
from beamcrawl.state.simhash_layout import simhash_layout
import beamcrawl.schemas.coders  # noqa: F401  (registers the record coders the output types name)
from beamcrawl.stores.base import Cell, Mutation, Store, open_store
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collect
from beamcrawl.transforms.near_copies import (
    MASK64,
    Evidence,
    add_evidence,
    key_items,
    merge_prefix_rows,
    order_key,
    pack_items,
    resolve_round,
    uint64s,
    unpack_items,
)
from beamcrawl.transforms.parse import PARSED_KINDS, body_kind
from beamcrawl.transforms.url_seen import (
    MAX_BUCKET_BITS,
    bucket_of,
    choose_bucket_bits,
)
from beamcrawl.transforms.store_join import JoinPath, StoreJoin

__all__ = [
    "Copy",
    "FindDuplicateContent",
    "NewContent",
    "NEW_BATCHES",
    "PAGE_BATCHES",
    "Probe",
    "apply_copy",
    "decide_checksum",
    "decide_checksums",
    "group_probes",
    "eligible",
    "probe_page",
    "settle",
]

# New originals' rows written per store call: an original's simhash-table rows (one a table)
# land on random keys, so they are written in large batches, which share B-tree pages (see
# EmbeddedStore.write_batch; ~5,000 originals, some 15 MB of mutations).
WRITE_BATCH = 100_000
# Stored originals' names a simhash-merge worker keeps (about 100 bytes each).
NAME_CACHE = 100_000
# The staging folder of the pages waiting for the copies (never committed), and the most
# pages and bytes a batch file of them holds (a page is about 2 KB pickled).
PAGE_BATCHES = "pagebatch"
BATCH_PAGES = 1_000
BATCH_BYTES = 4 * 1024 * 1024
# The staging folder of the new checksums waiting for the near copies (never committed), and
# the most probes a bundle holds before it sets them aside as one span file (a probe is about
# 200 bytes pickled: some 400 KB a file).
NEW_BATCHES = "newcontent"
BATCH_NEW = 2_000
# The most probes (pages' checksums, new candidates' simhashes) a bundle holds before it
# passes them on as blocks: bounded by size, not by bundle (the local runners' bundle is the
# round), some 30 MB of probes at most. Not lower: every flush sends a block per bucket, each
# with its own host names and framing, and at 20,000 the checksum and table buckets crossed
# 33 B a page more in a 79k-page round (bench/README.md, "Content seen without side inputs").
PROBES_HELD = 100_000
# The new checksums meet the near decisions in 2**NEAR_PART_BITS parts by their candidate's
# URL fingerprint (:func:`near_part`): a join, so a worker holds one part's decisions, not
# the round's (a side input would give every worker all of them).
NEAR_PART_BITS = 4
# Records (pages, new checksums) pickled together as one record of a batch file: a page
# pickled alone cost 25-40 µs to write and read back, most of it per-object work that a
# list of one record class pays once (schemas/records.py, Packed).
SET_ASIDE_CHUNK = 50
# The tags of content seen's own outputs and joins: the probes of the pages set aside, and
# the two sides of "Mark copies".
PROBES = "probes"
WAITING = "waiting"
COPIES = "copies"
# The sides of the joins of a part's new checksums with its pending pairs and near decisions.
NEW = "new"
PENDING = "pending"
NEAR = "near"
# The sides of the in-round resolution's gathering: the named near pairs and the crowded rows.
NAMED = "named"
CROWDED = "crowded"


# --- records -----------------------------------------------------------------------------


@shuffled
@dataclass(frozen=True)
class Copy:
    """The decision that a page copies another (applied with :func:`apply_copy`)."""

    url: str
    original: str
    kind: str  # exact | near
    distance: int = 0
    original_fetched_at: float | None = None
    original_digest: str | None = None
    batch: str = ""  # where the page waits (Probe.batch): the copy is sent to that batch


def by_batch(copy: Copy) -> Iterator[tuple[str, Copy]]:
    """``(batch, copy)`` for each batch the copied page waits in (:attr:`Probe.batch`), the
    key "Mark copies" joins the pages and their copies by."""
    names = copy.batch.split()
    for name in names or ("",):
        yield name, copy


@shuffled
@dataclass(frozen=True)
class NewContent:
    """A checksum the crawl has not kept yet: this round's candidate original for it, and the
    other pages of this round with the same bytes."""

    checksum: int
    first: Probe
    others: tuple[Probe, ...] = ()


# --- pure functions ----------------------------------------------------------------------


def eligible(page: ParsedPage) -> bool:
    """Whether a page takes part: a fetched response with a payload, whatever its status
    (identical 404 pages and redirect stubs are stored once too), but not robots.txt.

    Only 2xx pages take part in the near-copy check (see :func:`probe_page`)."""
    f = page.fetch
    return f.outcome == "fetched" and f.payload_size > 0 and f.entry.source != "robots"


def probe_page(page: ParsedPage, batch: str = "") -> Probe | None:
    """The page's :class:`Probe`, or None if it does not take part; ``batch`` names the batch
    it waits in.

    Uses the checksum and simhash the parse stage put on the page. A page that parse looked
    at (``body_kind`` set) and left without a simhash has none: not HTML, or too little
    text. Only a page that never went through parse (tests, tools) gets them computed here;
    one whose parse failed gets no simhash, as the hostile body would fail again.
    """
    if not eligible(page):
        return None
    f = page.fetch
    check = int(page.checksum or payload_checksum(f.body), 16)
    simhash: int | None = None
    if not 200 <= f.status < 300:
        pass  # error pages and redirect stubs: exact copies only, never "near" a page
    elif page.simhash is not None:
        simhash = int(page.simhash, 16)
    elif page.body_kind is None and page.parse_error is None and body_kind(f) in PARSED_KINDS:
        simhash = textfp.html_simhash(f.body, f.content_type)
    url_fp = f.entry.fp if f.entry.url == f.url and f.entry.fp else fingerprint(f.url)
    return Probe(f.url, url_fp, check, simhash, f.fetched_at, fetch_digest(f), batch)


def group_probes(block: ProbeBlock) -> list[tuple[int, list[Probe]]]:
    """A checksum bucket's probes grouped by checksum, as :func:`decide_checksums` takes
    them: ``(checksum, probes)`` sorted by checksum, each group's probes in the block's
    order. Grouped over the checksum column (a stable sort); the probes are made once, in
    that order."""
    if not len(block):
        return []
    order = np.argsort(block.checksum, kind="stable")
    checks = block.checksum[order]
    starts = np.flatnonzero(np.r_[True, checks[1:] != checks[:-1]]).tolist()
    # Made in the block's order, then gathered (cheaper than gathering each column).
    probes = list(map(block.probes().__getitem__, order.tolist()))
    ends = [*starts[1:], len(probes)]
    return [(check, probes[a:b]) for check, a, b in zip(checks[starts].tolist(), starts, ends)]


def decide_checksums(
    groups: Sequence[tuple[int, Sequence[Probe]]],
    stored: Iterable[tuple[int, ContentRecord]],
    round_no: int | None = None,
) -> tuple[list[Copy], list[NewContent]]:
    """Merges a bucket's checksums against the stored ones, in one pass.

    Args:
        groups: ``(checksum, this round's pages with it)``, sorted by checksum.
        stored: ``(checksum, record)`` of stored rows, sorted by checksum (a range scan or a
            key-set read); rows written by round ``round_no`` or later are ignored.
        round_no: This round.

    Returns:
        The copies of stored content, and the checksums that are new (one
        :class:`NewContent` each).

    The stored checksums are matched as a sorted uint64 array (:func:`_records_of`).
    """
    copies: list[Copy] = []
    new: list[NewContent] = []
    records = _records_of([check for check, _ in groups], stored)
    for (check, probes), record in zip(groups, records):
        found, fresh = decide_checksum(check, probes, record, round_no)
        copies.extend(found)
        if fresh is not None:
            new.append(fresh)
    return copies, new


def decide_checksum(
    check: int, probes: Sequence[Probe], record: ContentRecord | None, round_no: int | None
) -> tuple[list[Copy], NewContent | None]:
    """One checksum's decision, given its stored record (None: not stored): the copies of
    that record's page, or the checksum as new content (its first page by :func:`order_key`
    the candidate original, the others its copies). A record of round ``round_no`` or later
    counts as none; one URL fetched twice is one page; the page that holds the bytes itself
    is not a copy."""
    if record is not None and not counts_in_round(record.round, round_no):
        record = None
    by_url: dict[str, Probe] = {}
    for probe in sorted(probes, key=lambda p: order_key(p.url)):
        kept = by_url.setdefault(probe.url, probe)  # one URL fetched twice is one page ...
        if kept is not probe and probe.batch and probe.batch not in kept.batch.split():
            by_url[probe.url] = evolve(kept, batch=f"{kept.batch} {probe.batch}".lstrip())  # ... in both batches
    ordered = list(by_url.values())
    if record is None:
        return [], NewContent(check, ordered[0], tuple(ordered[1:]))
    exact = record.kind == "exact"
    return [
        Copy(
            probe.url,
            record.url,
            record.kind,
            record.distance,
            record.fetched_at if exact else None,
            record.digest if exact else None,
            probe.batch,
        )
        for probe in ordered
        if probe.url != record.url  # the page that holds these bytes, unchanged: not a copy
    ], None


def _records_of(checks: Sequence[int], stored: Iterable[tuple[int, ContentRecord]]) -> list[ContentRecord | None]:
    """For each of the sorted checksums, its stored record or None: the stored checksums as
    one sorted uint64 array, the bucket's placed among them by ``searchsorted``. The stored
    rows are read to their end (a scan's stream then closes)."""
    rows = list(stored)
    out: list[ContentRecord | None] = [None] * len(checks)
    if not rows or not checks:
        return out
    keys = uint64s([check for check, _ in rows])
    wanted = uint64s(checks)
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    for i in np.flatnonzero(keys[at] == wanted).tolist():
        check, record = rows[int(at[i])]
        if check == checks[i]:  # exact, whatever the ints
            out[i] = record
    return out


def settle(
    new: NewContent,
    near: tuple[str, int] | None,
    round_no: int | None,
    layout: textfp.TableLayout = textfp.LAYOUT,
) -> tuple[list[Copy], list[Mutation], list[Cell]]:
    """The final decision for a new checksum, and the rows that record it.

    Args:
        new: The checksum, its candidate original and this round's other pages with it.
        near: ``(original url, distance)`` when the candidate is a near copy, else None.
        round_no: This round (stamped on the rows).
        layout: The simhash tables' layout.

    Returns:
        ``(copies, content mutations, simhash-table cells)`` (the cells one a row:
        :func:`simhash_row_cells`).
    """
    first = new.first
    if near is not None:
        original, distance = near
        copies = [Copy(p.url, original, "near", distance, batch=p.batch) for p in (first, *new.others)]
        record = ContentRecord(original, "near", distance=distance, round=round_no)
        return copies, [Mutation.set(fp_key(new.checksum), record.to_cells())], []
    copies = [Copy(p.url, first.url, "exact", 0, first.fetched_at, first.digest, p.batch) for p in new.others]
    record = ContentRecord(first.url, "exact", first.fetched_at, first.digest, 0, round_no)
    hashes = simhash_row_cells(first, round_no, layout) if first.simhash is not None else []
    return copies, [Mutation.set(fp_key(new.checksum), record.to_cells())], hashes


def apply_copy(page: ParsedPage, copy: Copy | None) -> ParsedPage:
    """The page marked as a copy (a new object; the input is not changed)."""
    if copy is None:
        return page
    return evolve(
        page,
        duplicate_of=copy.original,
        duplicate_kind=copy.kind,
        duplicate_distance=copy.distance,
        original_fetched_at=copy.original_fetched_at,
        original_digest=copy.original_digest,
    )


# --- DoFns -------------------------------------------------------------------------------


class _PageProbes:
    """The probes of a bundle's pages, made where the pages are set aside (one pass over each
    page), named by the batch each page waits in, and collected per checksum bucket: one
    block per bucket leaves every ``max_held`` probes and at the bundle's end.

    A bucket's probes cross as one :class:`~beamcrawl.schemas.probe_block.ProbeBlock`: fixed
    width columns, the digests as raw bytes, the URLs as a host code and the rest and the
    batches as codes (86-94 bytes a probe, where a pickled list of them took 126-128).
    """

    def __init__(self, bits: int, max_held: int = PROBES_HELD) -> None:
        self.bits = bits
        self.max_held = max(1, max_held)
        self.buckets: dict[int, list[Probe]] = {}
        self.named = 0  # probes in the buckets
        self.unnamed: list[Probe] = []  # the probes of pages not yet in a batch
        self.checked = Metrics.counter("content_seen", "pages_checked")

    def take(self, page: ParsedPage, dead: Outlet) -> beam.pvalue.TaggedOutput | None:
        """Makes the page's probe (none if it does not take part); its dead letter if that
        fails, the page then waiting unmarked all the same."""
        try:
            dead.check(page)
            probe = probe_page(page)
        except Exception as exc:
            return dead.tagged(exc, page)
        if probe is not None:
            self.checked.inc()
            self.unnamed.append(probe)
        return None

    def name(self, batch: str) -> None:
        """The pages taken since the last call went to batch ``batch``: their probes are
        named by it and put in their buckets."""
        for probe in self.unnamed:
            bucket = bucket_of(probe.checksum, self.bits)
            probes = self.buckets.get(bucket)
            if probes is None:
                self.buckets[bucket] = probes = []
            probes.append(evolve(probe, batch=batch))
        self.named += len(self.unnamed)
        self.unnamed = []

    def full(self) -> bool:
        """Whether the named probes held are due to leave (``max_held`` of them)."""
        return self.named >= self.max_held

    def blocks(self, windowed: bool = True) -> Iterator[beam.pvalue.TaggedOutput]:
        """One ``(bucket, block)`` per bucket of the named probes, as a tagged output (of
        ``finish_bundle`` if ``windowed``, else of ``process``)."""
        for bucket, probes in self.buckets.items():
            kv = (bucket, ProbeBlock.from_probes(probes))
            yield beam.pvalue.TaggedOutput(PROBES, GlobalWindows.windowed_value(kv) if windowed else kv)
        self.buckets = {}
        self.named = 0


class _StoreJoinFn(beam.DoFn):
    """A DoFn that reads one of the content tables by key set or range scan
    (transforms/store_join.py); its counters are named after the table:
    ``<table>_path_scan``, ``<table>_path_keyset``, ``<table>_rows_scanned``,
    ``<table>_keys_looked_up``."""

    TABLE = ""

    def __init__(self, store_uri: str, round_no: int | None, rows: int, ratio: float, path: JoinPath) -> None:
        self.store_uri = store_uri
        self.round_no = round_no
        self.join = StoreJoin(self.TABLE, "content_seen", rows, ratio, path, prefix=f"{self.TABLE}_")

    def setup(self) -> None:
        self.store: Store = open_store(self.store_uri)

    def teardown(self) -> None:
        self.store.close()

    def _read(self, keys: Sequence[bytes], span: float) -> Iterable[tuple[bytes, Mapping[str, bytes]]]:
        return self.join.read(self.store, keys, span)


class _MergeChecksumsFn(_StoreJoinFn):
    """Merges one checksum bucket against the content-seen set: copies out, new content tagged."""

    TABLE = CONTENT_TABLE
    NEW = "new"

    def __init__(self, *args: Any, bits: int, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.bits = bits
        self.exact = Metrics.counter("content_seen", "exact_copies_of_stored")
        self.new_content = Metrics.counter("content_seen", "new_checksums")

    def process(self, element: tuple[int, Iterable[ProbeBlock]]) -> Iterator[Any]:
        _, blocks = element
        ordered = group_probes(ProbeBlock.concat(list(blocks)))
        if not ordered:
            return
        keys = [fp_key(check) for check, _ in ordered]
        span = (ordered[-1][0] - ordered[0][0] + 1) / float(1 << 64)
        # Only the rows of the bucket's own checksums are decoded (a scan reads its span's all).
        wanted = set(keys)
        stored = read_content_rows((key, cells) for key, cells in self._read(keys, span) if key in wanted)
        copies, new = decide_checksums(ordered, stored, self.round_no)
        self.exact.inc(len(copies))
        self.new_content.inc(len(new))
        for copy in copies:
            yield from by_batch(copy)
        for item in new:
            yield beam.pvalue.TaggedOutput(self.NEW, item)


class _BucketPrefixesFn(beam.DoFn):
    """Puts a bundle's new candidates into the permuted tables' buckets: one block per
    (group, bucket), a group being the tables whose permuted fingerprints begin alike
    (``TableLayout.bucket_groups``), so a candidate crosses once a group (4), not once a
    table (20).

    An item is the candidate's simhash and URL fingerprint (:class:`Item`), not its URL,
    and a bucket's items cross as one block of fixed-width pairs (:func:`pack_items`): the
    key names the group, and the merge computes each of its tables' row keys again.
    """

    def __init__(self, bits: int, layout: textfp.TableLayout, max_held: int = PROBES_HELD) -> None:
        self.bits = bits
        self.layout = layout
        self.groups = layout.bucket_groups(bits)
        self.max_held = max(1, max_held)

    def start_bundle(self) -> None:
        self.fps: list[int] = []
        self.url_fps: list[int] = []

    def process(self, new: NewContent) -> Iterator[tuple[tuple[int, int], bytes]]:
        if new.first.simhash is not None:
            self.fps.append(new.first.simhash)
            self.url_fps.append(new.first.url_fp)
            if len(self.fps) >= self.max_held:  # bounded by size, not by bundle
                yield from self._blocks()

    def finish_bundle(self) -> Iterator[WindowedValue]:
        for kv in self._blocks():
            yield GlobalWindows.windowed_value(kv)

    def _blocks(self) -> Iterator[tuple[tuple[int, int], bytes]]:
        """One ``((group, bucket), block)`` per bucket of each group of the items held."""
        if not self.fps:
            return
        fps, url_fps = uint64s(self.fps), uint64s(self.url_fps)
        self.fps, self.url_fps = [], []
        for group, tables in enumerate(self.groups):
            # Every table of the group begins its permuted fingerprints with the same bits.
            permuted = self.layout.permute_many(fps, tables[0])
            buckets = permuted >> np.uint64(64 - self.bits) if self.bits else np.zeros(len(fps), np.uint64)
            # A bucket's items in the bundle's order (a stable sort by bucket), as one block.
            order = np.argsort(buckets, kind="stable")
            ordered = buckets[order]
            starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
            for start, end in zip(starts.tolist(), [*starts[1:].tolist(), len(order)]):
                taken = order[start:end]
                yield (group, int(ordered[start])), pack_items(fps[taken], url_fps[taken])


class _MergePrefixesFn(_StoreJoinFn):
    """Merges one (group, bucket) of candidates against the stored simhash rows of each of
    the group's tables in turn: evidence per URL fingerprint out, crowded rows tagged."""

    TABLE = SIMHASH_TABLE
    CROWDED = "crowded"

    def __init__(self, *args: Any, bits: int, max_distance: int, layout: textfp.TableLayout, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.max_distance = max_distance
        self.layout = layout
        self.groups = layout.bucket_groups(bits)
        self.compared = Metrics.counter("content_seen", "stored_fingerprints_compared")
        self.pairs = Metrics.counter("content_seen", "round_pairs_compared")
        self.crowded_rows = Metrics.counter("content_seen", "crowded_rows")
        self.named = Metrics.counter("content_seen", "stored_originals_named")

    def setup(self) -> None:
        super().setup()
        # A stored original near a candidate is matched in up to 19 compact tables, one
        # bucket each: named once per worker. A name never changes, so the cache is only bounded.
        self.cache: dict[tuple[int, int], str] = {}

    def start_bundle(self) -> None:
        self.found: dict[int, Evidence] = {}

    def process(self, element: tuple[tuple[int, int], Iterable[bytes]]) -> Iterator[Any]:
        (group, _), blocks = element
        pairs = unpack_items(blocks)
        for table in self.groups[group]:
            yield from self._merge_table(table, pairs)

    def _merge_table(self, table: int, pairs: np.ndarray) -> Iterator[Any]:
        items, span = key_items(table, pairs, self.layout)
        keys = sorted({it.key for it in items})
        rows = self._read(keys, span)
        found, crowded, compared, compared_pairs = merge_prefix_rows(
            items, rows, self.round_no, self.max_distance, names=self._names
        )
        self.compared.inc(compared)
        self.pairs.inc(compared_pairs)
        self.crowded_rows.inc(len(crowded))
        for url_fp, evidence in found.items():
            add_evidence(self.found, url_fp, evidence)
        for row in crowded:
            yield beam.pvalue.TaggedOutput(self.CROWDED, row)

    def _names(self, originals: list[tuple[int, int]]) -> Mapping[tuple[int, int], str]:
        """Names matched originals from their first tables' rows: one key-set read for those
        this worker has not named yet."""
        wanted = [o for o in originals if o not in self.cache]
        if wanted:
            self.named.inc(len(wanted))
            keys = sorted({name_key(fp, self.layout) for fp, _ in wanted})
            if len(self.cache) > NAME_CACHE:
                self.cache.clear()
            rows = self.store.read_keys(self.TABLE, keys)
            self.cache.update(names_from_rows(wanted, rows, self.layout, self.round_no))
        return {o: self.cache[o] for o in originals if o in self.cache}

    def finish_bundle(self) -> Iterator[WindowedValue]:
        # One evidence a candidate a bundle, not one a table: a page near a stored original
        # matches it in up to every table, each naming the original's URL.
        for item in self.found.items():
            yield GlobalWindows.windowed_value(item)
        self.found = {}


def near_part(url_fp: int, bits: int = NEAR_PART_BITS) -> int:
    """The part a candidate's new checksum and its near decision meet in: the top ``bits`` of
    its URL fingerprint."""
    return bucket_of(url_fp & MASK64, bits)


def _to_resolution(row: Any) -> tuple[int, Any]:
    """A crowded row keyed for the in-round resolution (one place: key 0)."""
    return 0, row


def _by_part(kv: tuple[int, Any], bits: int) -> tuple[int, tuple[int, Any]]:
    """``(url fingerprint, value)`` keyed by its :func:`near_part`."""
    return near_part(kv[0], bits), kv


def _read_part(folder: str | None, items: Iterable[SpanRef | Sequence[NewContent]]) -> Iterator[list[NewContent]]:
    """A part's new checksums, a run at a time: read back from their spans in ``folder``, or
    (without staging) the runs themselves.

    Raises:
        OSError: a span file is missing or short (the round fails and is redone); a span
            that does not unpickle to a list fails it too, as this round wrote it.
    """
    if folder is None:
        for run in items:
            yield list(run)  # type: ignore[arg-type]
        return
    for data in read_spans(folder, list(items)):  # type: ignore[arg-type]
        run = pickle.loads(data)
        if not isinstance(run, list):
            raise OSError(f"a span of {folder} holds a {type(run).__name__}, not a run of new checksums")
        yield run


class _SetNewAsideFn(beam.DoFn):
    """Sets a bundle's new checksums aside by part (:func:`near_part`): every ``max_records``
    probes held, each part's run is pickled as one span of one span file in ``folder``
    (:func:`~beamcrawl.core.runtime.batch_files.write_spans`), or, without staging, passed
    on as it is. Out: ``(part, SpanRef | Packed)``; only the references wait for the near
    decisions. Counted as ``new_content_batches`` (files) and ``new_content_batch_bytes``."""

    def __init__(self, folder: str | None, bits: int = NEAR_PART_BITS, max_records: int = BATCH_NEW) -> None:
        self.folder = folder
        self.bits = bits
        self.max_records = max(1, max_records)
        self.batches = Metrics.counter("content_seen", "new_content_batches")
        self.batch_bytes = Metrics.counter("content_seen", "new_content_batch_bytes")

    def start_bundle(self) -> None:
        self.held: dict[int, list[NewContent]] = {}
        self.probes = 0  # the held checksums' pages: a checksum shared by many weighs as many

    def process(self, new: NewContent) -> Iterator[tuple[int, SpanRef | Packed]]:
        self.held.setdefault(near_part(new.first.url_fp, self.bits), []).append(new)
        self.probes += 1 + len(new.others)
        if self.probes >= self.max_records:
            yield from self._spill()

    def finish_bundle(self) -> Iterator[WindowedValue]:
        for kv in self._spill():
            yield GlobalWindows.windowed_value(kv)

    def _spill(self) -> Iterator[tuple[int, SpanRef | Packed]]:
        held, self.held, self.probes = sorted(self.held.items()), {}, 0
        if not held:
            return
        parts = [part for part, _ in held]
        if self.folder is None:
            yield from zip(parts, (Packed(run) for _, run in held))
            return
        refs = write_spans(self.folder, (pickle.dumps(Packed(run), pickle.HIGHEST_PROTOCOL) for _, run in held))
        self.batches.inc()
        self.batch_bytes.inc(sum(ref.length for ref in refs))
        yield from zip(parts, refs)


class _NamePendingFn(beam.DoFn):
    """Gives each pending candidate (:attr:`Evidence.pending`: few) its URL, which only the
    new content carries; every other candidate goes by its fingerprint. Takes one part
    (:func:`near_part`): its new checksums' references and its pending candidates' evidence,
    joined; a part with none pending reads nothing back."""

    def __init__(self, folder: str | None) -> None:
        self.folder = folder

    def process(self, element: tuple[int, Mapping[str, Iterable[Any]]]) -> Iterator[tuple[int, tuple[Any, ...]]]:
        _, groups = element
        pending: dict[int, Evidence] = dict(groups[PENDING])
        if not pending:
            return
        for run in _read_part(self.folder, groups[NEW]):
            for new in run:
                first = new.first
                evidence = pending.get(first.url_fp) if first.simhash is not None else None
                if evidence is not None:
                    yield 0, (first.url, first.url_fp, evidence)


def _resolve_gathered(
    element: tuple[int, Mapping[str, Iterable[Any]]], max_distance: int
) -> list[tuple[int, tuple[str, int]]]:
    """:func:`resolve_round` over the round's named candidates and crowded rows, gathered."""
    _, groups = element
    return resolve_round(groups[NAMED], list(groups[CROWDED]), max_distance)


class _SettleFn(beam.DoFn):
    """Decides each new checksum's pages and records the new content, in batches. Takes one
    part (:func:`near_part`): its new checksums' references and its near decisions, joined
    (:func:`_read_part`); a failing checksum is one dead letter."""

    def __init__(
        self, store_uri: str, round_no: int | None, layout: textfp.TableLayout, record: bool, folder: str | None
    ) -> None:
        self.store_uri = store_uri
        self.round_no = round_no
        self.layout = layout
        self.record = record
        self.folder = folder
        self.originals = Metrics.counter("content_seen", "new_originals")
        self.near = Metrics.counter("content_seen", "near_copies")
        self.exact = Metrics.counter("content_seen", "exact_copies_in_round")
        self.rows = Metrics.counter("content_seen", "rows_written")
        self.dead = Outlet("content_seen")

    def setup(self) -> None:
        self.store: Store | None = open_store(self.store_uri) if self.record else None

    def start_bundle(self) -> None:
        self.content: list[Mutation] = []
        self.hashes: list[Cell] = []

    def process(self, element: tuple[int, Mapping[str, Iterable[Any]]]) -> Iterator[Any]:
        _, groups = element
        near_by_fp: dict[int, tuple[str, int]] = dict(groups[NEAR])
        for run in _read_part(self.folder, groups[NEW]):
            for new in run:
                yield from self._settle(new, near_by_fp.get(new.first.url_fp))

    def _settle(self, new: NewContent, near: tuple[str, int] | None) -> Iterator[Any]:
        try:
            self.dead.check(new.first)
            copies, content, hashes = settle(new, near, self.round_no, self.layout)
        except Exception as exc:  # its pages go on unmarked; their content is not recorded
            yield self.dead.tagged(exc, new.first)
            return
        if near is None:
            self.originals.inc()
            self.exact.inc(len(copies))
        else:
            self.near.inc(len(copies))
        self.content.extend(content)
        self.hashes.extend(hashes)
        for copy in copies:
            yield from by_batch(copy)
        if len(self.content) + len(self.hashes) >= WRITE_BATCH:
            self._flush()

    def _flush(self) -> None:
        if self.store is not None:
            # Each table's rows as one sorted run (one transaction on the embedded store,
            # MutateRows requests of neighbouring keys on Bigtable); the simhash-table
            # rows of an original (one a table) as cells, with no Mutation and dict made a row.
            self.store.write_cells(SIMHASH_TABLE, sorted_cells(self.hashes))
            self.store.mutate(CONTENT_TABLE, sorted_run(self.content))
            self.rows.inc(len(self.content) + len(self.hashes))
        self.content, self.hashes = [], []

    def finish_bundle(self) -> None:
        self._flush()

    def teardown(self) -> None:
        if self.store is not None:
            self.store.close()


def _closest(decisions: Iterable[tuple[str, int]]) -> tuple[str, int]:
    """Of a page's near-copy decisions, the closest original (ties: the first in URL order)."""
    return min(decisions, key=_match_key_rev)


def _match_key_rev(decision: tuple[str, int]) -> tuple[int, tuple[int, int, str]]:
    original, distance = decision
    return distance, order_key(original)


class _MarkCopiesFn(beam.DoFn):
    """Takes a batch of pages with the copies among them (joined by batch name), reads the
    pages back from their batch file (with ``folder``; else the batch came whole), marks
    each copy with its original (every other page passes unchanged) and passes the batch
    on as one element: the stages after it take batches."""

    def __init__(self, folder: str | None = None) -> None:
        self.folder = folder
        self.exact = Metrics.counter("content_seen", "exact_copies")
        self.near = Metrics.counter("content_seen", "near_copies_marked")
        self.dead = Outlet("content_seen")

    def process(self, element: tuple[str, Mapping[str, Iterable[Any]]]) -> Iterator[Any]:
        _, joined = element
        copies = {copy.url: copy for copy in joined[COPIES]}
        for waiting in joined[WAITING]:
            # An unreadable file fails the round (OSError); so does a record that does not
            # unpickle, which this round wrote itself.
            pages = waiting.pages if self.folder is None else read_set_aside(self.folder, waiting)
            yield from self._mark(pages, copies)

    def _mark(self, pages: Iterable[ParsedPage], copies: Mapping[str, Copy]) -> Iterator[Any]:
        marked: list[ParsedPage] = []
        for page in pages:
            try:
                self.dead.check(page)
                copy = copies.get(page.fetch.url) if eligible(page) else None
                marked.append(apply_copy(page, copy))
            except Exception as exc:  # this page's letter; the batch's others go on
                yield self.dead.tagged(exc, page)
                continue
            if copy is not None:
                (self.exact if copy.kind == "exact" else self.near).inc()
        if marked:
            yield PageBatch(marked)


class _GatherFn(beam.DoFn):
    """Without staging: a bundle's records gathered into batches of at most ``max_records``
    (``batch_type`` of a list of them), so that the stages waiting for content seen's
    decisions take batches either way."""

    def __init__(self, max_records: int, batch_type: Callable[[list[Any]], Any]) -> None:
        self.max_records = max_records
        self.batch_type = batch_type

    def start_bundle(self) -> None:
        self.records: list[Any] = []

    def process(self, record: Any) -> Iterator[Any]:
        self.records.append(record)
        if len(self.records) >= self.max_records:
            yield self._take()

    def finish_bundle(self) -> Iterator[WindowedValue]:
        if self.records:
            yield GlobalWindows.windowed_value(self._take())

    def _take(self) -> Any:
        batch, self.records = self.batch_type(self.records), []
        return batch


class _SetAsideFn(beam.DoFn):
    """Writes the bundle's records (pages) to batch files in the round's staging; emits one
    :class:`~beamcrawl.core.runtime.batch_files.BatchRef` per file, all that waits for
    content seen's decisions. Counted as ``<what>_batches`` and ``<what>_batch_bytes``.

    A file's record is a run of up to ``chunk`` of them pickled as one ``Packed`` list (the
    class written once, a row of values each; read back by :func:`read_set_aside`), a run
    cut short where it would pass the file's ``max_bytes`` at the last run's size a record:
    a file holds at most about ``max_records`` of them, and passes ``max_bytes`` by at most
    one record's misjudged share."""

    def __init__(
        self, folder: str, max_records: int, max_bytes: int, what: str = "page", chunk: int = SET_ASIDE_CHUNK
    ) -> None:
        self.folder = folder
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.chunk = max(1, min(chunk, max_records))
        self.batches = Metrics.counter("content_seen", f"{what}_batches")
        self.batch_bytes = Metrics.counter("content_seen", f"{what}_batch_bytes")

    def start_bundle(self) -> None:
        self.writer = BatchWriter(self.folder, -(-self.max_records // self.chunk), self.max_bytes)
        self.run: list[Any] = []
        self.record_bytes = 0.0  # pickled bytes a record took in the last run (0: none yet)

    def _target(self) -> int:
        """Records the open run takes: ``chunk``, fewer where that many would pass the file's
        byte budget (at the last run's bytes a record), one until a run has been measured."""
        if not self.record_bytes:
            return 1
        return max(1, min(self.chunk, int(self.writer.room() // self.record_bytes)))

    def process(self, record: Any) -> Iterator[BatchRef]:
        self.run.append(record)
        if len(self.run) >= self._target():
            ref = self._write()
            if ref is not None:
                yield self._count(ref)

    def finish_bundle(self) -> Iterator[WindowedValue]:
        for ref in (self._write() if self.run else None, self.writer.close()):
            if ref is not None:
                yield GlobalWindows.windowed_value(self._count(ref))

    def _write(self) -> BatchRef | None:
        """Writes the run as one record; the file's reference if that closed it."""
        run, self.run = Packed(self.run), []
        blob = pickle.dumps(run, pickle.HIGHEST_PROTOCOL)
        self.record_bytes = len(blob) / len(run)
        return self.writer.append(blob)

    def _count(self, ref: BatchRef) -> BatchRef:
        self.batches.inc()
        self.batch_bytes.inc(ref.length)
        return ref


def read_set_aside(folder: str, ref: BatchRef) -> list[Any]:
    """The records :class:`_SetAsideFn` wrote to one batch file, in their order.

    Raises:
        OSError: the file does not match its reference (the round fails and is redone); a
            record that does not unpickle to a list fails it too, as this round wrote it.
    """
    out: list[Any] = []
    for record in read_batch(folder, ref):
        run = pickle.loads(record)
        if not isinstance(run, list):
            raise OSError(f"a batch file of {folder} holds a {type(run).__name__}, not a run of records")
        out += run
    return out


class _SetPagesAsideFn(_SetAsideFn):
    """Writes the bundle's pages to batch files (:class:`_SetAsideFn`) and makes each page's
    probe on the way, named by the file the page waits in. Out: ``(file name, BatchRef)``
    per file, and (``PROBES``) blocks of probes by checksum bucket, every ``probes_held``
    probes and at the bundle's end."""

    def __init__(
        self,
        folder: str,
        bits: int,
        max_records: int,
        max_bytes: int,
        chunk: int = SET_ASIDE_CHUNK,
        probes_held: int = PROBES_HELD,
    ) -> None:
        super().__init__(folder, max_records, max_bytes, "page", chunk)
        self.bits = bits
        self.probes_held = probes_held
        self.dead = Outlet("content_seen")

    def start_bundle(self) -> None:
        super().start_bundle()
        self.probes = _PageProbes(self.bits, self.probes_held)

    def process(self, page: ParsedPage) -> Iterator[Any]:  # type: ignore[override]
        letter = self.probes.take(page, self.dead)
        if letter is not None:
            yield letter
        for ref in super().process(page):
            yield ref.name, ref
        if self.probes.full():
            yield from self.probes.blocks(windowed=False)

    def _write(self) -> BatchRef | None:
        ref = super()._write()
        self.probes.name(self.writer.name)  # the file the run just went to
        return ref

    def finish_bundle(self) -> Iterator[Any]:  # type: ignore[override]
        for ref in super().finish_bundle():
            yield GlobalWindows.windowed_value((ref.value.name, ref.value))
        yield from self.probes.blocks()


class _GatherPagesFn(_GatherFn):
    """Without staging: a bundle's pages gathered into batches (:class:`_GatherFn`), each
    named by a fresh id, its pages' probes made on the way. Out: ``(id, PageBatch)``, and
    (``PROBES``) blocks of probes by checksum bucket, every ``probes_held`` probes and at
    the bundle's end."""

    def __init__(self, bits: int, max_records: int, probes_held: int = PROBES_HELD) -> None:
        super().__init__(max_records, PageBatch)
        self.bits = bits
        self.probes_held = probes_held
        self.dead = Outlet("content_seen")

    def start_bundle(self) -> None:
        super().start_bundle()
        self.probes = _PageProbes(self.bits, self.probes_held)

    def process(self, page: ParsedPage) -> Iterator[Any]:
        letter = self.probes.take(page, self.dead)
        if letter is not None:
            yield letter
        yield from super().process(page)
        if self.probes.full():
            yield from self.probes.blocks(windowed=False)

    def _take(self) -> tuple[str, PageBatch]:
        name = uuid.uuid4().hex
        self.probes.name(name)
        return name, super()._take()

    def finish_bundle(self) -> Iterator[Any]:  # type: ignore[override]
        yield from super().finish_bundle()
        yield from self.probes.blocks()


class _ResolveNearCopies(beam.PTransform):
    """Evidence per candidate's URL fingerprint, the crowded rows and the new content by part
    → ``(url fingerprint, (original, distance))`` for every near copy."""

    def __init__(self, max_distance: int, new_staging: str | None, part_bits: int = NEAR_PART_BITS) -> None:
        super().__init__()
        self.max_distance = max_distance
        self.new_staging = new_staging
        self.part_bits = part_bits

    def expand(self, inputs: tuple[beam.PCollection, beam.PCollection, beam.PCollection]) -> beam.PCollection:
        evidence, crowded, new = inputs  # new: (part, a run of new checksums or its span)
        of_stored = (
            evidence
            | "Near a stored original" >> beam.Filter(lambda kv: kv[1].stored is not None)
            | "Copy of the closest" >> beam.Map(lambda kv: (kv[0], (kv[1].stored[1], kv[1].stored[0])))
        )
        # Only the round's near pairs need URLs (their order decides): few, so their URLs
        # are looked up where the new content is, not carried through the table buckets;
        # the pending pairs meet the new content of their part in a join.
        pending = (
            evidence
            | "Near this round's only" >> beam.Filter(lambda kv: kv[1].pending)
            | "Pending pairs by part" >> beam.Map(_by_part, self.part_bits)
        )
        named = (
            {NEW: new, PENDING: pending}
            | "Join new content and pending pairs" >> beam.CoGroupByKey()
            | "Name the round's near pairs" >> beam.ParDo(_NamePendingFn(self.new_staging))
        )
        # The round's near pairs and the crowded rows (traps) are resolved in one place,
        # gathered there by a join: no side input.
        in_round = (
            {NAMED: named, CROWDED: crowded | "Crowded rows to the resolution" >> beam.Map(_to_resolution)}
            | "Gather the round's near pairs" >> beam.CoGroupByKey()
            | "First original wins, in URL order" >> beam.FlatMap(_resolve_gathered, self.max_distance)
        )
        return (of_stored, in_round) | "Near copies" >> beam.Flatten()


# --- the transform -----------------------------------------------------------------------


class FindDuplicateContent(beam.PTransform):
    """``ParsedPage`` → ``PageBatch``, copies marked with ``duplicate_of`` (see the module
    docstring); new originals are recorded in the store. One batch per batch file of
    ``staging`` (its pages in the file's order), or without staging per ``batch_pages``
    pages of a bundle: the stages after content seen take a batch per DoFn call, not a page.

    Args:
        store_uri: The crawl's store (with the ``content`` and ``simhash`` tables).
        round_no: This round; rows it (or a later round) wrote are ignored, and new rows carry
            it. None trusts every row (tests, one-off runs).
        bits: At least ``2**bits`` checksum buckets and ``2**bits`` buckets per permuted table;
            more when the content-seen set is large.
        max_bits: At most ``2**max_bits`` buckets.
        path: ``"auto"`` picks a key-set read or a range scan per bucket by cost; ``"scan"``
            or ``"keyset"`` forces one.
        stored_rows: Size of the content-seen set; default the store's estimate, read once
            when the pipeline is built.
        keyset_cost_ratio: Cost of a key-set read per key, in scanned keys; default the
            store's.
        max_distance: Most differing simhash bits of a near copy (the layout must find them).
        layout: The permuted tables' layout (part of the stored keys); default the one the
            store recorded, or chooses and records now (``state/simhash_layout.py``).
        record: Whether to write the new originals (False: decide only, e.g. a dry run).
        staging: Where the pages wait for the copies: a folder of the round's staging
            (``outputs.staged(PAGE_BATCHES)``, never committed), in batch files of at most
            ``batch_pages`` pages and ``batch_bytes`` bytes, only a reference per file
            waiting in the runner. None: the pages wait whole, gathered into batches of
            ``batch_pages`` (tests, one-off runs).
        new_staging: Likewise for the new checksums waiting for the near copies
            (``outputs.staged(NEW_BATCHES)``): a span file every ``BATCH_NEW`` probes of a
            bundle, a span per part. None: they wait whole, a run per part.
        part_bits: The new checksums meet the near decisions in ``2**part_bits`` parts by
            URL fingerprint (:func:`near_part`).
        probes_held: The most probes a bundle's checksum and table bucketing hold before
            they leave as blocks (at the bundle's end, too).
    """

    def __init__(
        self,
        store_uri: str,
        round_no: int | None = None,
        *,
        bits: int = 0,
        max_bits: int = MAX_BUCKET_BITS,
        path: JoinPath = "auto",
        stored_rows: int | None = None,
        keyset_cost_ratio: float | None = None,
        max_distance: int = textfp.MAX_DISTANCE,
        layout: textfp.TableLayout | None = None,
        record: bool = True,
        staging: str | None = None,
        batch_pages: int = BATCH_PAGES,
        batch_bytes: int = BATCH_BYTES,
        new_staging: str | None = None,
        part_bits: int = NEAR_PART_BITS,
        probes_held: int = PROBES_HELD,
    ) -> None:
        super().__init__()
        if path not in ("auto", "scan", "keyset"):
            raise ValueError(f"path must be auto, scan or keyset, got {path!r}")
        if layout is not None and max_distance > layout.max_distance:
            raise ValueError(f"the layout finds at most {layout.max_distance} differing bits")
        self.store_uri = store_uri
        self.round_no = round_no
        self.min_bits = bits
        self.max_bits = max(bits, max_bits)
        self.path: JoinPath = path
        self.stored_rows = stored_rows
        self.keyset_cost_ratio = keyset_cost_ratio
        self.max_distance = max_distance
        self.layout = layout
        self.record = record
        self.staging = staging
        self.batch_pages = batch_pages
        self.batch_bytes = batch_bytes
        self.new_staging = new_staging
        self.part_bits = part_bits
        self.probes_held = probes_held
        self.bits = bits  # the chosen count, set by expand()

    def _size(self) -> tuple[int, float, textfp.TableLayout]:
        """Reads what sizing needs from the store, and the layout of its simhash tables
        (``state/simhash_layout.py``: chosen and recorded if the store has none), once, when
        the pipeline is built."""
        if self.stored_rows is None or self.keyset_cost_ratio is None or self.layout is None:
            with open_store(self.store_uri) as store:
                if self.stored_rows is None:
                    self.stored_rows = store.estimate_rows(CONTENT_TABLE)
                if self.keyset_cost_ratio is None:
                    self.keyset_cost_ratio = float(store.keyset_cost_ratio)
                if self.layout is None:
                    self.layout = simhash_layout(store, record=self.record)
        if self.max_distance > self.layout.max_distance:
            raise ValueError(f"the layout finds at most {self.layout.max_distance} differing bits")
        return self.stored_rows, self.keyset_cost_ratio, self.layout  # type: ignore[return-value]

    def expand(self, pages: beam.PCollection) -> beam.PCollection:
        rows, ratio, layout = self._size()
        self.bits = choose_bucket_bits(rows, min_bits=self.min_bits, max_bits=self.max_bits)
        join = dict(store_uri=self.store_uri, round_no=self.round_no, rows=rows, ratio=ratio, path=self.path)

        # The pages wait for content seen's decisions in batches (on disk, a reference a
        # file, with staging); their probes are made as they are set aside, each named by
        # the batch its page waits in, and leave as one block per checksum bucket.
        if self.staging is None:
            wait: beam.DoFn = _GatherPagesFn(self.bits, self.batch_pages, self.probes_held)
        else:
            wait = _SetPagesAsideFn(
                self.staging, self.bits, self.batch_pages, self.batch_bytes, probes_held=self.probes_held
            )
        waiting = pages | "Set pages aside" >> beam.ParDo(wait).with_outputs(PROBES, ERRORS, main="batches")
        collect(waiting[ERRORS])
        checked = (
            waiting[PROBES]
            # Typed, so that the blocks cross the shuffle by their own coder (schemas/coders.py).
            | "Probe blocks" >> beam.Map(_as_is).with_output_types(tuple[int, ProbeBlock])
            | "Group by checksum bucket" >> beam.GroupByKey()
            | "Sort-merge with content-seen set"
            >> beam.ParDo(_MergeChecksumsFn(bits=self.bits, **join)).with_outputs(_MergeChecksumsFn.NEW, main="copies")
        )
        new = checked[_MergeChecksumsFn.NEW]
        # The new checksums wait for the near copies by part (their URL fingerprint's top
        # bits): on disk, a span of a file per part and bundle's run, with staging; the
        # simhash buckets are made as they come.
        new_parts = new | "Set new content aside" >> beam.ParDo(_SetNewAsideFn(self.new_staging, self.part_bits))
        merged = (
            new
            | "Bucket by table and permuted prefix"
            >> beam.ParDo(_BucketPrefixesFn(self.bits, layout, self.probes_held)).with_output_types(
                tuple[tuple[int, int], bytes]
            )
            | "Group by table bucket" >> beam.GroupByKey()
            | "Sort-merge with simhash tables"
            >> beam.ParDo(
                _MergePrefixesFn(bits=self.bits, max_distance=self.max_distance, layout=layout, **join)
            ).with_outputs(_MergePrefixesFn.CROWDED, main="evidence")
        )
        evidence = merged.evidence | "Combine evidence per page" >> beam.CombinePerKey(_merge_all)
        near = (evidence, merged[_MergePrefixesFn.CROWDED], new_parts) | "Resolve near copies" >> _ResolveNearCopies(
            self.max_distance, self.new_staging, self.part_bits
        )
        # Every new checksum looks its candidate up in the near decisions (few: near copies
        # only): they meet by part in a join of references and decisions, not a side input
        # every worker would hold whole, nor a shuffle of every new page by URL.
        closest = (
            near
            | "Closest original per page" >> beam.CombinePerKey(_closest)
            | "Near copies by part" >> beam.Map(_by_part, self.part_bits)
        )
        settled = (
            {NEW: new_parts, NEAR: closest}
            | "Join new content and its near copies" >> beam.CoGroupByKey()
            | "Decide and record new content"
            >> beam.ParDo(_SettleFn(self.store_uri, self.round_no, layout, self.record, self.new_staging)).with_outputs(
                ERRORS, main="copies"
            )
        )
        collect(settled[ERRORS])
        copies = (checked["copies"], settled.copies) | "All copies" >> beam.Flatten()
        # Each batch meets the copies among its pages (keyed by the batch's name): a
        # shuffle of references and copies, no side input that grows with the round.
        marked = (
            {WAITING: waiting.batches, COPIES: copies}
            | "Join batches and their copies" >> beam.CoGroupByKey()
            # Typed: a batch's coder estimates its size from a few pages (schemas/coders.py).
            | "Mark copies"
            >> beam.ParDo(_MarkCopiesFn(self.staging)).with_output_types(PageBatch).with_outputs(ERRORS, main="pages")
        )
        collect(marked[ERRORS])
        return marked.pages


def _as_is(element: Any) -> Any:
    return element


def _merge_all(evidence: Iterable[Evidence]) -> Evidence:
    merged: Evidence | None = None
    for e in evidence:
        merged = e if merged is None else merged.merge(e)
    assert merged is not None
    return merged
