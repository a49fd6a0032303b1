"""Content seen: the pure decisions, then FindDuplicateContent on a real embedded store,
round after round, and on simweb's copies and look-alikes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import random
import tempfile
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import apache_beam as beam
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamcrawl.core.content import textfp
from beamcrawl.core.urls.urlnorm import fingerprint
from beamcrawl.core.archive.warc_revisit import payload_digest
from beamcrawl.schemas.probe_block import ProbeBlock
from beamcrawl.schemas.records import FetchResult, FrontierEntry, PageBatch, ParsedPage, fp_key
from beamcrawl.core.runtime.batch_files import SpanRef
from beamcrawl.simweb import SimWeb
from beamcrawl.stores.base import Mutation, open_store
from beamcrawl.transforms.dead_letter import collected
from beamcrawl.transforms.parse import parse_fetch
from beamcrawl.transforms.url_seen import bucket_of, page_candidates
from beamcrawl.transforms.content_seen import (
    Copy,
    FindDuplicateContent,
    NewContent,
    Probe,
    _BucketPrefixesFn,
    _MergePrefixesFn,
    NEAR,
    NEAR_PART_BITS,
    NEW,
    PENDING,
    PROBES_HELD,
    _NamePendingFn,
    _SetAsideFn,
    _SetNewAsideFn,
    _SettleFn,
    _read_part,
    near_part,
    apply_copy,
    decide_checksums,
    eligible,
    group_probes,
    probe_page,
    read_set_aside,
    settle,
)
from beamcrawl.transforms.near_copies import (
    Evidence,
    MAX_PAIRWISE,
    key_items,
    merge_prefix_rows,
    pack_items,
    resolve_round,
    unpack_items,
)
from beamcrawl.state.content_rows import (
    CONTENT_TABLE,
    SIMHASH_TABLE,
    ContentRecord,
    simhash_value,
    names_from_rows,
    simhash_cells,
)

from beamcrawl.state.simhash_layout import LAYOUT_CELL, LAYOUT_KEY, recorded_layout

import content_seen_reference as before

HTML = "text/html; charset=utf-8"


@pytest.fixture
def store_uri(tmp_path) -> str:
    """An embedded store (it has the content tables: stores/base.py lists them)."""
    return f"sqlite:///{tmp_path}/store.sqlite"


@pytest.fixture(params=["embedded", "bigtable"])
def any_store_uri(request: pytest.FixtureRequest, tmp_path) -> str:
    """The embedded store, then Bigtable (the emulator; skipped where there is none)."""
    if request.param == "embedded":
        return f"sqlite:///{tmp_path}/store.sqlite"
    return request.getfixturevalue("bigtable_uri")


def article(seed: int, words: int = 400) -> list[str]:
    rng = random.Random(seed)
    return [f"w{rng.randrange(5000)}x" for _ in range(words)]


def html(words: list[str], extra: str = "") -> bytes:
    paras = " ".join(words)
    return f"<html><head><title>t</title></head><body><p>{paras}</p>{extra}</body></html>".encode()


def page(
    url: str,
    body: bytes,
    *,
    status: int = 200,
    ctype: str = HTML,
    at: float = 1000.0,
    source: str = "link",
    outcome: str = "fetched",
) -> ParsedPage:
    entry = FrontierEntry(url=url, fp=fingerprint(url), host=url.split("/")[2], due_ms=0, source=source)
    fetch = FetchResult(
        entry=entry,
        outcome=outcome,
        url=url,
        final_url=url,
        status=status,
        fetched_at=at,
        response_headers=[("Content-Type", ctype)],
        body=body,
        raw_body=body,
    )
    return ParsedPage(fetch=fetch)


def probe(url: str, check: int = 1, simhash: int | None = None, at: float = 1.0, batch: str = "") -> Probe:
    return Probe(url, fingerprint(url), check, simhash, at, f"sha1:{url}", batch)


def run(uri: str, pages: list[ParsedPage], round_no: int | None = 1, **kw) -> tuple[dict[str, tuple], dict[str, int]]:
    """Runs FindDuplicateContent; returns (url -> (duplicate_of, kind, distance,
    original_fetched_at, original_digest)) and the content_seen counters."""
    sink = os.path.join(tempfile.gettempdir(), f"content-seen-{uuid.uuid4().hex}.jsonl")
    p = TestPipeline(runner="FnApiRunner")
    marked = p | beam.Create(pages) | FindDuplicateContent(uri, round_no, **kw)
    _ = marked | beam.ParDo(_WriteDecisions(sink))
    assert_that(collected(p), equal_to([]), label="No dead letters")
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace("content_seen"))["counters"]
    # The elements that came out of "Mark copies", counted where they arrive.
    (arrived,) = result.metrics().query(MetricsFilter().with_name("test_batches_out"))["counters"]
    out = {}
    lines = 0
    with open(sink, encoding="utf-8") as f:
        for line in f:
            url, decision = json.loads(line)
            # A URL the round fetched more than once has one decision, whatever batch each
            # of its pages waited in.
            assert out.setdefault(url, tuple(decision)) == tuple(decision), url
            lines += 1
    os.remove(sink)
    assert len(out) == len({pg.fetch.url for pg in pages})  # every page comes out,
    assert lines == len(pages)  # once
    return out, {c.key.metric.name: c.committed for c in counters} | {"test_batches_out": arrived.committed}


class _WriteDecisions(beam.DoFn):
    """Appends each page's content decision to a JSON-lines file (the runner is in process),
    and counts the batches that arrive (``test_batches_out``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.batches = Metrics.counter("test", "test_batches_out")

    def process(self, batch: PageBatch) -> None:
        assert type(batch) is PageBatch and batch.pages  # no page alone, no empty batch
        self.batches.inc()
        with open(self.path, "a", encoding="utf-8") as f:
            for pg in batch.pages:
                row = [
                    pg.fetch.url,
                    [
                        pg.duplicate_of,
                        pg.duplicate_kind,
                        pg.duplicate_distance,
                        pg.original_fetched_at,
                        pg.original_digest,
                    ],
                ]
                f.write(json.dumps(row) + "\n")


# --- pure decisions ----------------------------------------------------------------------


def test_eligible_pages_are_fetched_payloads_of_any_status():
    assert eligible(page("http://a.com/", b"x"))
    assert eligible(page("http://a.com/f.pdf", b"%PDF", ctype="application/pdf"))
    assert eligible(page("http://a.com/", b"x", status=404))  # identical error pages are stored once
    assert probe_page(page("http://a.com/e", html(article(1)), status=404)).simhash is None  # exact only
    assert not eligible(page("http://a.com/", b"", status=200))
    assert not eligible(page("http://a.com/robots.txt", b"User-agent: *", source="robots"))
    assert not eligible(page("http://a.com/", b"x", outcome="error"))


def test_probe_takes_what_parse_found():
    body = html(article(1))
    parsed = parse_fetch(page("http://a.com/", body).fetch, "beamcrawl")
    got = probe_page(parsed)
    assert got is not None and got.simhash == textfp.html_simhash(body) and f"{got.checksum:016x}" == parsed.checksum
    short = parse_fetch(page("http://a.com/s", b"<html><body><p>Loading</p></body></html>").fetch, "beamcrawl")
    assert short.body_kind == "html" and short.simhash is None
    assert probe_page(short).simhash is None  # parse found too little text: not computed again
    failed = page("http://a.com/f", body)
    failed.parse_error = "RecursionError: too deep"
    assert probe_page(failed).simhash is None  # a hostile body is not parsed twice


def test_probe_computes_what_parse_left_out():
    body = html(article(1))
    got = probe_page(page("http://a.com/", body))
    assert got is not None
    assert got.simhash == textfp.html_simhash(body)
    assert got.digest == payload_digest(body)
    pdf = probe_page(page("http://a.com/f.pdf", b"%PDF-1.4 data", ctype="application/pdf"))
    assert pdf is not None and pdf.simhash is None


def test_decide_checksums_merges_in_one_pass_and_keeps_one_original():
    stored = [
        (5, ContentRecord("http://kept.com/five", "exact", 10.0, "sha1:FIVE", 0, 1)),
        (7, ContentRecord("http://kept.com/seven", "near", None, None, 2, 1)),
        (9, ContentRecord("http://crashed.com/nine", "exact", 30.0, "sha1:NINE", 0, 3)),  # this round
    ]
    groups = [
        (5, [probe("http://x.com/5", 5), probe("http://kept.com/five", 5)]),
        (6, [probe("http://z.com/6?print=1", 6), probe("http://z.com/6", 6), probe("http://yy.com/6", 6)]),
        (7, [probe("http://x.com/7", 7)]),
        (9, [probe("http://x.com/9", 9)]),
    ]
    copies, new = decide_checksums(groups, stored, round_no=3)
    assert copies == [
        Copy("http://x.com/5", "http://kept.com/five", "exact", 0, 10.0, "sha1:FIVE"),  # the original itself: no copy
        Copy("http://x.com/7", "http://kept.com/seven", "near", 2),
    ]
    assert [n.checksum for n in new] == [6, 9]
    assert new[0].first.url == "http://z.com/6" and [p.url for p in new[0].others] == [
        "http://yy.com/6",
        "http://z.com/6?print=1",
    ]


# --- the item shape: URL fingerprints, not URLs, cross the table-bucket shuffle -------------


def _buckets(cands, bits, rnd, item_of):
    """A round's items per (table, bucket), each bucket's items dealt into random bundle
    lists (in random order), as the bucketing DoFns and the shuffle would hand them over."""
    buckets: dict[tuple[int, int], list] = {}
    for url, url_fp, simhash in cands:
        for t in range(20):
            permuted = textfp.permute(simhash, t)
            buckets.setdefault((t, bucket_of(permuted, bits)), []).append(item_of(t, permuted, url, url_fp, simhash))
    out = []
    for key, items in buckets.items():
        rnd.shuffle(items)
        cuts = sorted(rnd.sample(range(len(items) + 1), min(2, len(items) + 1)))
        out.append((key, [items[: cuts[0]], items[cuts[0] : cuts[-1]], items[cuts[-1] :]]))
    rnd.shuffle(out)
    return out


def _stored_rows(originals, cells):
    """The simhash table's rows after writing each ``(probe, round)`` with ``cells``."""
    stored: dict[bytes, dict[str, bytes]] = {}
    for original, written in originals:
        for m in cells(original, written):
            stored.setdefault(m.key, {}).update(m.cells or {})
    return stored


def _rows_of(keys, stored):
    return [(k, stored[k]) for k in sorted(set(keys)) if k in stored]


def _decide_with_url_items(cands, originals, round_no, bits, rnd, max_pairwise):
    """url -> (original, distance): the near-copy decisions the URL-carrying items gave,
    against rows that name the URL in every cell."""
    stored = _stored_rows(originals, before.simhash_cells)
    evidence: dict[str, before.Evidence] = {}
    for _, lists in _buckets(cands, bits, rnd, lambda t, p, url, f, s: before._Item(textfp.table_key(t, p), p, s, url)):
        items = sorted((it for lst in lists for it in lst), key=lambda it: it.key)
        found, _, _ = before.merge_prefix_rows(
            items, _rows_of([it.key for it in items], stored), round_no, max_pairwise=max_pairwise
        )
        for url, ev in found.items():
            evidence[url] = evidence[url].merge(ev) if url in evidence else ev
    out = {url: (ev.stored[1], ev.stored[0]) for url, ev in evidence.items() if ev.stored is not None}
    in_round = [ev for ev in evidence.values() if ev.stored is None and ev.neighbours]
    out.update(before.resolve_round(in_round))
    return out


def _decide_with_fp_items(cands, originals, round_no, bits, rnd, max_pairwise, cells):
    """url -> (original, distance) from the fingerprint items, named only where pending,
    against rows written by ``cells``."""
    stored = _stored_rows(originals, cells)

    def names(wanted):
        return names_from_rows(wanted, stored, round_no=round_no)  # as _MergePrefixesFn names them

    evidence: dict[int, Evidence] = {}
    crowded = []
    for (table, _), lists in _buckets(cands, bits, rnd, lambda t, p, url, f, s: (s, f)):
        for lst in lists:
            assert all(type(it) is tuple and all(type(v) is int for v in it) for it in lst)
        items, _ = key_items(table, [it for lst in lists for it in lst])
        found, rows, _, _ = merge_prefix_rows(
            items, _rows_of([it.key for it in items], stored), round_no, max_pairwise=max_pairwise, names=names
        )
        crowded += rows
        for fp, ev in found.items():
            evidence[fp] = evidence[fp].merge(ev) if fp in evidence else ev
    by_fp = {fp: (ev.stored[1], ev.stored[0]) for fp, ev in evidence.items() if ev.stored is not None}
    named = [(url, fp, evidence[fp]) for url, fp, _ in cands if fp in evidence and evidence[fp].pending]
    rnd.shuffle(named)
    rnd.shuffle(crowded)
    by_fp.update(resolve_round(named, crowded, max_pairwise=max_pairwise))
    return {url: by_fp[fp] for url, fp, _ in cands if fp in by_fp}


_PATHS = st.text(alphabet="ab/?=1", min_size=0, max_size=6)


@st.composite
def near_rounds(draw):
    """A round's candidates (unique random URLs; simhashes in clusters of planted near copies
    and chains) and stored originals (near them, of their own URLs, from later rounds)."""
    rnd = draw(st.randoms(use_true_random=False))
    bases = [rnd.getrandbits(64) for _ in range(draw(st.integers(1, 5)))]

    def near(fp: int) -> int:
        for bit in rnd.sample(range(64), rnd.choice((0, 1, 1, 2, 3, 4))):
            fp ^= 1 << bit
        return fp

    urls = draw(
        st.lists(
            st.tuples(st.sampled_from(["a.com", "b.org", "cc.net", "a.com:81"]), _PATHS),
            min_size=1,
            max_size=24,
            unique=True,
        )
    )
    cands = []
    for host, path in urls:
        url = f"http://{host}/{path}"
        cands.append((url, fingerprint(url), near(rnd.choice(bases)) if rnd.random() < 0.9 else rnd.getrandbits(64)))
    originals = []
    for _ in range(draw(st.integers(0, 6))):
        own = rnd.random() < 0.3
        url = rnd.choice(cands)[0] if own else f"http://kept{rnd.randrange(5)}.com/{rnd.randrange(9)}"
        originals.append((probe(url, simhash=near(rnd.choice(bases))), rnd.choice((1, 1, 2, 3))))
    return cands, originals, rnd


@settings(max_examples=300, deadline=None)
@given(near_rounds(), st.integers(0, 3), st.sampled_from([2, 3, 64]), st.sampled_from(["compact", "url in every cell"]))
def test_fingerprint_items_decide_as_url_items_did(round_, bits, max_pairwise, cells):
    """The same near-copy decisions (originals, copies, distances) from items that carry URL
    fingerprints as from the URL-carrying items before them (``content_seen_reference``),
    whatever the buckets and bundle lists, against compact stored cells or the rows existing
    crawls hold; small ``max_pairwise`` reaches crowded rows."""
    cands, originals, rnd = round_
    write = simhash_cells if cells == "compact" else before.simhash_cells
    old = _decide_with_url_items(cands, originals, 2, bits, random.Random(rnd.random()), max_pairwise)
    new = _decide_with_fp_items(cands, originals, 2, bits, random.Random(rnd.random()), max_pairwise, write)
    assert new == old


def _decide_with_group_buckets(cands, originals, round_no, bits, rnd, path, folder):
    """url -> (original, distance) from the bucketing and merging DoFns themselves: the
    candidates dealt into bundles, bucketed once a group of tables, each bucket's blocks
    handed over in random order and merged against the originals' compact rows in a real
    embedded store."""
    uri = f"sqlite:///{folder}/seen.sqlite"
    with open_store(uri) as store:
        store.mutate(SIMHASH_TABLE, [m for original, written in originals for m in simhash_cells(original, written)])
    news = [NewContent(i, Probe(url, url_fp, i, simhash, 1.0, "")) for i, (url, url_fp, simhash) in enumerate(cands)]
    cuts = sorted(rnd.sample(range(len(news) + 1), 2))
    buckets: dict[tuple[int, int], list[bytes]] = {}
    # Blocks leave every max_held candidates as well as at the bundle's end.
    bucket_fn = _BucketPrefixesFn(bits, textfp.LAYOUT, max_held=rnd.choice([1, 2, 5, PROBES_HELD]))
    for bundle in (news[: cuts[0]], news[cuts[0] : cuts[1]], news[cuts[1] :]):
        bucket_fn.start_bundle()
        out = [kv for new in bundle for kv in bucket_fn.process(new)]
        out += [wv.value for wv in bucket_fn.finish_bundle()]
        for key, block in out:
            buckets.setdefault(key, []).append(block)
    merge_fn = _MergePrefixesFn(
        store_uri=uri, round_no=round_no, rows=len(originals), ratio=1.0, path=path, bits=bits,
        max_distance=textfp.MAX_DISTANCE, layout=textfp.LAYOUT,
    )  # fmt: skip
    merge_fn.setup()
    try:
        merge_fn.start_bundle()
        crowded = []
        for key, blocks in rnd.sample(sorted(buckets.items()), len(buckets)):
            rnd.shuffle(blocks)
            crowded += [out.value for out in merge_fn.process((key, blocks))]
        evidence = dict(wv.value for wv in merge_fn.finish_bundle())
    finally:
        merge_fn.teardown()
    assert not crowded  # at most 24 candidates: no row is crowded
    by_fp = {fp: (ev.stored[1], ev.stored[0]) for fp, ev in evidence.items() if ev.stored is not None}
    named = [(url, fp, evidence[fp]) for url, fp, _ in cands if fp in evidence and evidence[fp].pending]
    by_fp.update(resolve_round(named, []))
    return {url: by_fp[fp] for url, fp, _ in cands if fp in by_fp}


@settings(max_examples=40, deadline=None)
@given(near_rounds(), st.sampled_from([0, 1, 3, 12]), st.sampled_from(["scan", "keyset"]))
def test_buckets_of_table_groups_decide_as_a_bucket_a_table_did(round_, bits, path):
    """A candidate crosses once a group of tables (``TableLayout.bucket_groups``) and the
    merge runs each of the group's tables in turn: the near-copy decisions are those of
    the URL-carrying items bucketed a table at a time, whatever the bits (0: one group of
    twenty; 12: ten groups split by a second block), the bundles and the read path."""
    cands, originals, rnd = round_
    old = _decide_with_url_items(cands, originals, 2, bits, random.Random(rnd.random()), MAX_PAIRWISE)
    with tempfile.TemporaryDirectory() as folder:
        new = _decide_with_group_buckets(cands, originals, 2, bits, random.Random(rnd.random()), path, folder)
    assert new == old


def test_items_crossing_the_table_bucket_shuffle_hold_no_url():
    fn = _BucketPrefixesFn(bits=2, layout=textfp.LAYOUT)
    fn.start_bundle()
    urls = [f"http://site{i}.example/article/{i}?page=2" for i in range(30)]
    for i, url in enumerate(urls):
        assert list(fn.process(NewContent(i, probe(url, check=i, simhash=random.Random(i).getrandbits(64))))) == []
    elements = [wv.value for wv in fn.finish_bundle()]
    fps = {fingerprint(u): random.Random(i).getrandbits(64) for i, u in enumerate(urls)}
    groups = textfp.LAYOUT.bucket_groups(2)
    assert len(groups) == 4
    # Once a group of tables, not once a table: two uint64s an item.
    assert sum(len(block) for _, block in elements) == 4 * len(urls) * 16
    seen = []
    for (group, bucket), block in elements:
        assert type(block) is bytes
        tables = groups[group]
        for simhash, url_fp in unpack_items([block]).tolist():
            assert fps[url_fp] == simhash
            # The bucket is the item's leading bits in every table of its group.
            assert {bucket_of(textfp.permute(simhash, t), 2) for t in tables} == {bucket}
            seen += [(t, url_fp) for t in tables]
        encoded = pickle.dumps(((group, bucket), block))
        assert not any(url.encode() in encoded for url in urls) and b"http" not in encoded
    assert sorted(seen) == sorted((t, fp) for t in range(20) for fp in fps)  # every table, once


def test_a_bucket_block_keeps_the_bundles_order():
    """A bucket's items leave the bundle in the order the candidates came (the merge sorts
    by row key stably, so ties between bundles resolve as before the blocks)."""
    fn = _BucketPrefixesFn(bits=0, layout=textfp.LAYOUT)
    fn.start_bundle()
    shared = 0x0123_4567_89AB_CDEF
    urls = [f"http://copy{i}.example/" for i in range(5)]
    for i, url in enumerate(urls):
        assert list(fn.process(NewContent(i, probe(url, check=i, simhash=shared)))) == []
    elements = [wv.value for wv in fn.finish_bundle()]
    assert sorted(key for key, _ in elements) == [(0, 0)]  # no bits: one bucket, all twenty tables
    for _, block in elements:
        assert [fp for _, fp in unpack_items([block]).tolist()] == [fingerprint(u) for u in urls]


@given(st.integers(0, 64), st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=20))
def test_bucket_groups_share_their_bucket_bits_and_cover_every_table_once(bits, fps):
    """Every table is in one group, and the tables of a group begin every permuted
    fingerprint with the same ``bits`` bits (so a bucket is one bucket of each)."""
    groups = textfp.LAYOUT.bucket_groups(bits)
    assert sorted(t for tables in groups for t in tables) == list(range(20))
    for tables in groups:
        for fp in fps:
            assert len({textfp.permute(fp, t) >> (64 - bits) if bits else 0 for t in tables}) == 1
    sizes = {0: [20], 1: [10, 6, 3, 1], 11: [10, 6, 3, 1], 12: [4, 3, 2, 1, 3, 2, 1, 2, 1, 1]}
    if bits in sizes:  # the default layout's first blocks are 11 bits: a group a first block
        assert [len(tables) for tables in groups] == sizes[bits]
    with pytest.raises(ValueError):
        textfp.LAYOUT.bucket_groups(65)


@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)), max_size=40), st.integers(0, 19))
def test_packed_items_key_as_the_pairs_did(pairs, table):
    """Items as a packed block key and sort as the same items as int pairs, and as each
    item's own ``table_key`` sorted stably (the keys made over an array are the scalar ones)."""
    fps = np.array([a for a, _ in pairs], dtype=np.uint64)
    url_fps = np.array([b for _, b in pairs], dtype=np.uint64)
    cut = len(pairs) // 2
    blocks = [pack_items(fps[:cut], url_fps[:cut]), pack_items(fps[cut:], url_fps[cut:])]
    keyed, span = key_items(table, unpack_items(blocks))
    assert (keyed, span) == key_items(table, pairs)
    one_by_one = [(textfp.table_key(table, textfp.permute(fp, table)), fp, url_fp) for fp, url_fp in pairs]
    assert [tuple(k) for k in keyed] == sorted(one_by_one, key=lambda k: k[0])
    assert unpack_items(blocks).tolist() == [list(p) for p in pairs]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.builds(
            Probe,
            url=st.sampled_from(["http://a.test/", "http://a.test/?x", "http://b.test/p"]),
            url_fp=st.integers(0, 2**64 - 1),
            checksum=st.sampled_from([0, 7, 2**63, 2**64 - 1]),  # few: groups of many
            simhash=st.one_of(st.none(), st.integers(0, 2**64 - 1)),
            fetched_at=st.floats(allow_nan=False),
            digest=st.just("sha1:" + "A" * 32),
        ),
        max_size=30,
    ),
    st.integers(1, 4),
)
def test_probes_group_over_their_block_as_one_by_one(probes, parts):
    """The checksum merge groups a bucket's blocks over the checksum column as it grouped
    the probes one by one: by checksum, each group in the blocks' order."""
    cut = len(probes) // parts or 1
    blocks = [ProbeBlock.from_probes(probes[at : at + cut]) for at in range(0, len(probes), cut)]
    expected: dict[int, list[Probe]] = {}
    for probe in probes:
        expected.setdefault(probe.checksum, []).append(probe)
    assert group_probes(ProbeBlock.concat(blocks)) == sorted(expected.items())


def test_a_torn_bucket_block_is_refused():
    with pytest.raises(ValueError, match="not whole items"):
        unpack_items([b"\0" * 16, b"\0" * 7])


def test_two_urls_sharing_a_fingerprint_do_not_fail_the_round(store_uri):
    """A 64-bit collision within one round: the two pages share one name in the join, so a
    decision may be wrong, but every page comes out and the round completes."""
    a = article(11)
    shared = 0x0123_4567_89AB_CDEF
    pages = []
    for i, url in enumerate(("http://one.com/a", "http://two.com/b", "http://three.com/c")):
        words = [*a[:i], f"changed{i}", *a[i + 1 :]]
        pg = page(url, html(words), at=float(i))
        if i < 2:
            pg = dataclasses.replace(
                pg, fetch=dataclasses.replace(pg.fetch, entry=dataclasses.replace(pg.fetch.entry, fp=shared))
            )
        pages.append(pg)
    got, _ = run(store_uri, pages)
    assert set(got) == {p.fetch.url for p in pages}
    assert sum(1 for d in got.values() if d[0] is None) >= 1


def test_settle_records_originals_and_copies():
    first = probe("http://a.com/", 42, simhash=99, at=7.0)
    other = probe("http://b.com/", 42)
    copies, content, hashes = settle(NewContent(42, first, (other,)), None, round_no=4)
    assert copies == [Copy("http://b.com/", "http://a.com/", "exact", 0, 7.0, "sha1:http://a.com/")]
    assert [m.key for m in content] == [fp_key(42)]
    assert ContentRecord.from_cells(content[0].cells) == ContentRecord(
        "http://a.com/", "exact", 7.0, "sha1:http://a.com/", 0, 4
    )
    assert len(hashes) == 20 and {key[0] for key, _, _ in hashes} == set(range(20))
    assert [Mutation(k, {c: v}) for k, c, v in hashes] == simhash_cells(first, 4)
    copies, content, hashes = settle(NewContent(42, first, (other,)), ("http://o.com/", 2), round_no=4)
    assert [(c.url, c.original, c.kind) for c in copies] == [
        ("http://a.com/", "http://o.com/", "near"),
        ("http://b.com/", "http://o.com/", "near"),
    ]
    assert ContentRecord.from_cells(content[0].cells).kind == "near" and hashes == []


def test_a_copy_offers_no_links_to_the_frontier():
    body = html(article(1), '<a href="/elsewhere">x</a>')
    parsed = parse_fetch(page("http://mirror.org/a", body).fetch, "beamcrawl")
    assert [c.url for c in page_candidates(parsed)] == ["http://mirror.org/elsewhere"]
    copy = apply_copy(parsed, Copy("http://mirror.org/a", "http://site.com/a", "exact"))
    assert copy.links and page_candidates(copy) == []


def test_an_existing_store_gets_the_content_tables_when_opened(tmp_path):
    import sqlite3

    path = tmp_path / "store.sqlite"
    open_store(str(path)).close()
    with sqlite3.connect(path) as conn:  # a store made before the content tables existed
        conn.execute(f"DROP TABLE {CONTENT_TABLE}")
        conn.execute(f"DROP TABLE {SIMHASH_TABLE}")
    with open_store(str(path)) as store:
        store.mutate(CONTENT_TABLE, [Mutation.set(fp_key(1), ContentRecord("http://a.com/").to_cells())])
        assert [k for k, _ in store.read_range(CONTENT_TABLE)] == [fp_key(1)]
        assert list(store.read_range(SIMHASH_TABLE)) == []


def test_apply_copy_returns_a_new_page():
    original = page("http://b.com/", b"x")
    marked = apply_copy(original, Copy("http://b.com/", "http://a.com/", "exact", 0, 5.0, "sha1:X"))
    assert original.duplicate_of is None
    assert (marked.duplicate_of, marked.duplicate_kind, marked.original_fetched_at) == ("http://a.com/", "exact", 5.0)


# --- the transform -----------------------------------------------------------------------


def round_one() -> list[ParsedPage]:
    a, b = article(1), article(2)
    near = list(a)
    near[200] = "different"
    return [
        page("http://site.com/a", html(a), at=100.0),
        page("http://mirror.org/a", html(a), at=101.0),
        page("http://site.com/a?print=1", html(a), at=102.0),
        page("http://near-copy.net/a", html(near), at=103.0),
        page("http://site.com/b", html(b), at=104.0),
        page("http://site.com/gone", html(a), status=404),
        page("http://site.com/f.pdf", b"%PDF-1.4 one", ctype="application/pdf"),
        page("http://mirror.org/f.pdf", b"%PDF-1.4 one", ctype="application/pdf"),
        page("http://site.com/robots.txt", b"User-agent: *\n", ctype="text/plain", source="robots"),
        page("http://other.com/robots.txt", b"User-agent: *\n", ctype="text/plain", source="robots"),
    ]


def test_copies_in_one_round(store_uri):
    pages = round_one()
    got, counters = run(store_uri, pages)
    digest = payload_digest(html(article(1)))
    assert got["http://site.com/a"] == (None, None, None, None, None)
    assert got["http://mirror.org/a"] == ("http://site.com/a", "exact", 0, 100.0, digest)
    assert got["http://site.com/a?print=1"] == ("http://site.com/a", "exact", 0, 100.0, digest)
    assert got["http://near-copy.net/a"][:2] == ("http://site.com/a", "near")
    assert got["http://near-copy.net/a"][2] <= 3
    assert got["http://site.com/b"][0] is None
    # an error page carrying a stored page's bytes is an exact copy (stored once), never a near one
    assert got["http://site.com/gone"][:2] == ("http://site.com/a", "exact")
    assert got["http://mirror.org/f.pdf"][:2] == ("http://site.com/f.pdf", "exact")
    assert got["http://site.com/robots.txt"][0] is None and got["http://other.com/robots.txt"][0] is None
    assert counters["new_originals"] == 3  # a, b, the PDF
    assert (
        counters["exact_copies"] == 4 and counters["near_copies_marked"] == 1
    )  # mirror.org/a, ?print=1, gone (404), mirror.org/f.pdf

    with open_store(store_uri) as store:
        content = {k: ContentRecord.from_cells(c) for k, c in store.read_range(CONTENT_TABLE)}
        simhash_rows = list(store.read_range(SIMHASH_TABLE))
    assert len(content) == 4  # a, the near copy's bytes, b, the PDF
    near_row = [r for r in content.values() if r.kind == "near"]
    assert [(r.url, r.round) for r in near_row] == [("http://site.com/a", 1)]
    assert {len(cells) for _, cells in simhash_rows} == {1}
    # A new embedded store keeps ten tables (state/simhash_layout.py), and says so.
    assert len(simhash_rows) == 2 * 10  # two HTML originals (a, b) in 10 tables
    with open_store(store_uri) as store:
        assert recorded_layout(store) == textfp.TEN_TABLES


def test_a_store_whose_simhash_rows_predate_the_record_keeps_twenty_tables(store_uri):
    """A store written before layouts were recorded holds its rows in the twenty tables: the
    next round reads them there (and records so), and its new originals go there too."""
    run(store_uri, round_one(), round_no=1, layout=textfp.LAYOUT)  # as earlier versions wrote
    with open_store(store_uri) as store:
        assert recorded_layout(store) is None
        assert len(list(store.read_range(SIMHASH_TABLE))) == 2 * 20
    a = article(1)
    near = list(a)
    near[50] = "another"
    got, counters = run(
        store_uri,
        [page("http://new.org/near", html(near), at=502.0), page("http://new.org/c", html(article(3)), at=503.0)],
        round_no=2,
    )
    assert got["http://new.org/near"][:2] == ("http://site.com/a", "near")
    assert got["http://new.org/c"][0] is None and counters["new_originals"] == 1
    with open_store(store_uri) as store:
        assert recorded_layout(store) == textfp.LAYOUT
        assert len(list(store.read_range(SIMHASH_TABLE))) == 3 * 20  # a, b, then c


def test_a_recorded_layout_is_kept_whatever_the_store_would_choose(store_uri):
    """An embedded store that recorded the twenty tables keeps them, though a new one takes ten."""
    with open_store(store_uri) as store:
        assert store.check_and_set("meta", LAYOUT_KEY, LAYOUT_CELL, None, textfp.layout_name(textfp.LAYOUT).encode())
    run(store_uri, round_one(), round_no=1)
    with open_store(store_uri) as store:
        assert len(list(store.read_range(SIMHASH_TABLE))) == 2 * 20


def test_one_original_whatever_the_input_order(store_uri, tmp_path):
    pages = round_one()
    first, _ = run(store_uri, pages)
    other_uri = f"sqlite:///{tmp_path}/other.sqlite"
    second, _ = run(other_uri, list(reversed(pages)), bits=2)
    assert first == second


def test_pages_waiting_in_batch_files_come_out_once_each_marked_as_when_they_waited_whole(store_uri, tmp_path):
    """The batch-file handoff loses no page and duplicates none: the decisions are those of
    the pages waiting whole, and every file written is one the marking read."""
    a = article(1)
    pages = round_one() + [
        page(f"http://host{i}.com/p{j}", html(article(10 + i) if j else a), at=200.0 + i)
        for i in range(9)
        for j in range(3)
    ]
    whole, _ = run(f"sqlite:///{tmp_path}/whole.sqlite", pages)
    folder = str(tmp_path / "pagebatch")
    new_folder = str(tmp_path / "newcontent")
    batched, counters = run(
        store_uri, pages, staging=folder, batch_pages=4, batch_bytes=64 * 1024, new_staging=new_folder
    )
    assert batched == whole
    # The new checksums waited for the near copies in files of their own folder too.
    assert counters["new_content_batches"] == len(os.listdir(new_folder)) >= 1
    assert counters["new_content_batch_bytes"] == sum(
        os.path.getsize(os.path.join(new_folder, n)) for n in os.listdir(new_folder)
    )
    assert counters["page_batches"] == len(os.listdir(folder)) >= -(-len(pages) // 4)
    assert counters["page_batch_bytes"] == sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder))
    # One element per batch file comes out of "Mark copies", not one per page.
    assert counters["test_batches_out"] == len(os.listdir(folder)) < len(pages)
    # a byte budget smaller than a page: a file per page
    one_each, counters = run(f"sqlite:///{tmp_path}/one.sqlite", pages, staging=str(tmp_path / "one"), batch_bytes=1)
    assert one_each == whole
    assert counters["page_batches"] == counters["test_batches_out"] == len(pages)
    # Without staging the pages are gathered into batches of batch_pages per bundle.
    gathered, counters = run(f"sqlite:///{tmp_path}/gathered.sqlite", pages, batch_pages=4)
    assert gathered == whole
    # The probes leave their bundle in blocks every few of them, not only at its end: the
    # same decisions, staged or not.
    for staged in (True, False):
        folder_kw = {"staging": str(tmp_path / "held"), "batch_pages": 4} if staged else {}
        held, _ = run(f"sqlite:///{tmp_path}/held{staged}.sqlite", pages, probes_held=3, **folder_kw)
        assert held == whole
    assert -(-len(pages) // 4) <= counters["test_batches_out"] < len(pages)


@pytest.mark.parametrize("waiting", ["files", "whole"])
def test_a_url_fetched_twice_is_marked_in_every_batch_it_waits_in(tmp_path, waiting):
    """The copies reach the pages by the batches they wait in: a URL the round fetched twice
    (two pages, two batches) gets its decision in both, whether it copies a stored page,
    another page of the round, or is near one; the original fetched twice is no copy."""
    store_uri = f"sqlite:///{tmp_path}/store.sqlite"
    run(store_uri, round_one(), round_no=1)
    a, five = article(1), article(5)
    near = list(a)
    near[50] = "another"
    twice = {
        "http://new.org/a": html(a),  # an exact copy of a stored page
        "http://new.org/five": html(five),  # this round's original
        "http://new.org/five?print=1": html(five),  # its copy
        "http://new.org/near": html(near),  # near a stored page
    }
    pages = [page(url, body, at=600.0 + i) for i in range(2) for url, body in twice.items()]
    # One batch a page: each URL's two pages wait in two batches.
    kw = {"staging": str(tmp_path / "files"), "batch_bytes": 1} if waiting == "files" else {"batch_pages": 1}
    got, counters = run(store_uri, pages, round_no=2, **kw)
    assert counters["test_batches_out"] == len(pages)
    assert got["http://new.org/a"][:3] == ("http://site.com/a", "exact", 0)
    assert got["http://new.org/five"][0] is None
    assert got["http://new.org/five?print=1"][:3] == ("http://new.org/five", "exact", 0)
    assert got["http://new.org/near"][:2] == ("http://site.com/a", "near")
    assert counters["exact_copies"] == 4 and counters["near_copies_marked"] == 2  # pages, not URLs


def test_later_rounds_find_copies_of_what_was_kept(any_store_uri):
    store_uri = any_store_uri
    run(store_uri, round_one(), round_no=1)
    a = article(1)
    near = list(a)
    near[50] = "another"
    later = [
        page("http://site.com/a", html(a), at=500.0),  # unchanged: not a copy of itself
        page("http://new.org/a", html(a), at=501.0),
        page("http://new.org/near", html(near), at=502.0),
        page("http://new.org/copy-of-near", html([*a[:200], "different", *a[201:]]), at=503.0),
        page("http://new.org/f.pdf", b"%PDF-1.4 one", ctype="application/pdf"),
        page("http://new.org/c", html(article(3))),
    ]
    got, counters = run(store_uri, later, round_no=2)
    assert got["http://site.com/a"][0] is None
    assert got["http://new.org/a"] == ("http://site.com/a", "exact", 0, 100.0, payload_digest(html(a)))
    assert got["http://new.org/near"][:2] == ("http://site.com/a", "near")
    # Bytes that were a near copy last round are a near copy of the same original now.
    assert got["http://new.org/copy-of-near"][:2] == ("http://site.com/a", "near")
    assert got["http://new.org/f.pdf"][:2] == ("http://site.com/f.pdf", "exact")
    assert got["http://new.org/c"][0] is None
    assert counters["exact_copies_of_stored"] == 3


def test_rerun_of_a_round_decides_the_same(store_uri):
    first, _ = run(store_uri, round_one(), round_no=1)
    again, _ = run(store_uri, round_one(), round_no=1)  # the round crashed after recording
    assert again == first
    next_round, _ = run(store_uri, round_one(), round_no=2)
    # In the next round the kept page is itself, unchanged; its copies still copy it.
    assert next_round["http://site.com/a"][0] is None
    assert next_round["http://mirror.org/a"][:2] == ("http://site.com/a", "exact")


@pytest.mark.parametrize("path", ["scan", "keyset", "auto"])
def test_scan_and_keyset_paths_agree(any_store_uri, path):
    store_uri = any_store_uri
    run(store_uri, round_one(), round_no=1)
    with open_store(store_uri) as store:  # bulk up the tables so a scan has rows to skip
        rng = random.Random(4)
        filler = [ContentRecord(f"http://filler/{i}", round=1) for i in range(300)]
        store.mutate(CONTENT_TABLE, [Mutation.set(fp_key(rng.getrandbits(64)), r.to_cells()) for r in filler])
        store.mutate(
            SIMHASH_TABLE,
            [m for i in range(50) for m in simhash_cells(probe(f"http://f/{i}", simhash=rng.getrandbits(64)), 1)],
        )
    a = article(1)
    got, counters = run(
        store_uri,
        [page("http://new.org/a", html(a)), page("http://new.org/b", html([*a[:10], "x", *a[11:]]))],
        round_no=2,
        path=path,
        bits=1,
    )
    assert got["http://new.org/a"][:2] == ("http://site.com/a", "exact")
    assert got["http://new.org/b"][:2] == ("http://site.com/a", "near")
    if path == "scan":
        assert counters.get("content_path_keyset", 0) == 0 and counters["content_path_scan"] >= 1
        assert counters["simhash_rows_scanned"] >= 1
    if path == "keyset":
        assert counters.get("content_path_scan", 0) == 0 and counters["content_keys_looked_up"] == 2


def test_an_original_names_its_url_in_one_simhash_row_of_twenty():
    url = "http://site.example/a/long/path/to/an/article.html"
    rows = simhash_cells(probe(url, simhash=0xDEAD_BEEF_0123_4567), 3)
    assert len(rows) == 20 and len({m.key for m in rows}) == 20
    named = [m for m in rows if url.encode() in next(iter(m.cells.values()))]
    assert [m.key[0] for m in named] == [0]  # the first table's row
    compact = {next(iter(m.cells.values())) for m in rows[1:]}
    assert compact == {b"\x05"}  # nothing but the format byte: the round is the first table's
    assert simhash_value(compact.pop()) == (None, None)
    assert simhash_value(next(iter(named[0].cells.values()))) == (url, 3)


def test_rows_that_name_the_url_in_every_cell_still_find_copies(any_store_uri):
    """Rows written before the compact cells (every cell names its URL: existing crawls)
    are read as they were, on both stores, alongside the compact ones."""
    store_uri = any_store_uri
    a, b = article(21), article(22)
    with open_store(store_uri) as store:
        old_rows = before.simhash_cells(probe("http://old.org/a", simhash=textfp.html_simhash(html(a))), 1)
        store.mutate(SIMHASH_TABLE, old_rows)
    run(store_uri, [page("http://new.org/b", html(b), at=5.0)], round_no=2)  # written compact
    near_a = [*a[:100], "other", *a[101:]]
    near_b = [*b[:100], "other", *b[101:]]
    got, counters = run(
        store_uri, [page("http://x.org/a", html(near_a)), page("http://x.org/b", html(near_b))], round_no=3
    )
    assert got["http://x.org/a"][:2] == ("http://old.org/a", "near")
    assert got["http://x.org/b"][:2] == ("http://new.org/b", "near")
    assert counters["stored_originals_named"] >= 1  # the compact match was named from its first table


def test_a_compact_cell_without_its_naming_row_is_not_a_match(store_uri):
    """A crash may write some of an original's 20 rows: a match whose naming row is missing
    counts as no match, and the round goes on."""
    a = article(23)
    rows = simhash_cells(probe("http://cut.org/a", simhash=textfp.html_simhash(html(a))), 1)
    with open_store(store_uri) as store:
        store.mutate(SIMHASH_TABLE, rows[1:])
    got, _ = run(store_uri, [page("http://x.org/a", html([*a[:5], "z", *a[6:]]))], round_no=2)
    assert got["http://x.org/a"][0] is None


def test_near_copies_in_one_round_keep_exactly_one_original(store_uri):
    base = article(7, 600)
    # Six servings of one story, each with its own view counter: different bytes, one text.
    variants = [page(f"http://host{i}.com/story", html(base, f"<p>{i * 137 + 5} views</p>")) for i in range(6)]
    got, _ = run(store_uri, list(reversed(variants)))
    originals = [u for u, d in got.items() if d[0] is None]
    assert originals == ["http://host0.com/story"]
    assert {d[0] for u, d in got.items() if d[0]} == {"http://host0.com/story"}


def test_a_trap_of_near_copies_crowds_a_row_and_still_keeps_exactly_one_original(store_uri):
    """More near copies of one text than a row compares pair by pair (a trap): the row is
    crowded, its members reach the in-round resolution by the same join as the named pairs
    (no side input), and exactly one original is kept, the first in URL order."""
    base = article(9, 600)
    n = MAX_PAIRWISE + 6
    variants = [page(f"http://host{i}.com/story", html(base, f"<p>{i * 137 + 5} views</p>")) for i in range(n)]
    got, counters = run(store_uri, list(reversed(variants)))
    assert counters["crowded_rows"] >= 1
    originals = [u for u, d in got.items() if d[0] is None]
    assert originals == ["http://host0.com/story"]
    assert len(got) == n and {d[0] for d in got.values() if d[0]} == {"http://host0.com/story"}


@st.composite
def near_copy_rounds(draw):
    """A round of pages: a few stories served by several hosts, each serving its own view
    counter (near copies) or the very bytes of another (exact copies), among unrelated pages."""
    rnd = draw(st.randoms(use_true_random=False))
    pages = []
    for story in range(draw(st.integers(1, 3))):
        words = article(1000 + 10_000 * story + rnd.randrange(10_000), 300)  # stories apart
        for _ in range(draw(st.integers(1, 6))):
            body = html(words, f"<p>{rnd.randrange(10**6)} views</p>") if rnd.random() < 0.7 else html(words)
            pages.append(page(f"http://s{story}-h{rnd.randrange(50)}.com/{'a' * rnd.randrange(1, 4)}", body))
    pages += [page(f"http://other{i}.org/", html(article(50_000 + i, 300))) for i in range(draw(st.integers(0, 4)))]
    unique = {p.fetch.url: p for p in pages}  # one fetch a URL
    order = list(unique.values())
    rnd.shuffle(order)
    return order


@settings(max_examples=12, deadline=None)
@given(near_copy_rounds(), st.sampled_from([0, 1, 4, 6]), st.sampled_from([1, 3, PROBES_HELD]), st.booleans())
def test_near_decisions_reach_their_pages_whatever_the_parts_and_flushes(pages, part_bits, probes_held, staged):
    """The new checksums meet the near decisions and pending pairs by part, and the probes
    leave their bundle every ``probes_held``: whatever the parts' bits, the flushes and the
    staging, a round decides exactly as with one part and one flush; a copy's original is
    an original of its own story, and of pages with the very same bytes one at most is."""
    with tempfile.TemporaryDirectory() as folder:
        one, _ = run(f"sqlite:///{folder}/one.sqlite", pages, part_bits=0)
        kw = {"staging": f"{folder}/pages", "new_staging": f"{folder}/new", "batch_pages": 2} if staged else {}
        got, _ = run(f"sqlite:///{folder}/got.sqlite", pages, part_bits=part_bits, probes_held=probes_held, **kw)
    assert got == one
    assert len(got) == len(pages)
    for url, (original, *_rest) in got.items():
        if original is not None:
            assert got[original][0] is None and original.split("-")[0] == url.split("-")[0], (url, original)
    by_body: dict[bytes, list[str]] = {}
    for p in pages:
        by_body.setdefault(p.fetch.body, []).append(p.fetch.url)
    assert all(sum(got[u][0] is None for u in urls) <= 1 for urls in by_body.values()), by_body.values()


# --- on simweb ---------------------------------------------------------------------------


def simweb_pages(web: SimWeb) -> Iterator[ParsedPage]:
    for hi in range(web.hosts):
        host = web.names[hi]
        for j in range(web.pages_per_host):
            path = web.page_path(hi, j)
            for target in (path, path + "?print=1") if j % 5 == 0 else (path,):
                resp = web.respond(host, target)
                yield page(web.url(hi, target), resp.body, ctype=resp.content_type)


def test_simweb_every_byte_identical_copy_is_caught_and_no_look_alike_is_merged(store_uri):
    web = SimWeb(30, seed=3, pages_per_host=12, copy_hosts_from=0)
    pages = list(simweb_pages(web))
    got, _ = run(store_uri, pages)
    by_bytes: dict[str, list[str]] = {}
    for p in pages:
        by_bytes.setdefault(hashlib.sha1(p.fetch.body).hexdigest(), []).append(p.fetch.url)
    assert any(len(urls) > 2 for urls in by_bytes.values())
    for urls in by_bytes.values():
        unmarked = [u for u in urls if got[u][0] is None]
        assert len(unmarked) <= 1, urls  # all but one marked (all, when the bytes are a near copy)
    body = {p.fetch.url: p.fetch.body for p in pages}
    for url, (original, kind, *_rest) in got.items():
        if kind == "exact":
            assert body[original] == body[url]

    # Look-alikes (one template, different articles) stay apart.
    def model(url: str):
        parts = urlsplit(url)
        hi = web.index[parts.hostname]
        return web.page_model(hi, web.page_index(hi, parts.path))

    near = [(u, o) for u, (o, kind, *_rest) in got.items() if kind == "near"]
    assert len(near) > 20
    for url, original in near:
        assert model(url).text_key == model(original).text_key, (url, original)  # the same article


# --- the numpy checksum merge decides as the per-pair one did (the near merges: test_near_copies.py)

import content_seen_merge_reference as per_pair  # noqa: E402


@settings(max_examples=150, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 30), st.integers(0, 30), st.integers(1, 3))
def test_numpy_checksum_merge_is_the_one_pass_merge(rnd, n_groups, n_stored, round_no):
    """Copies and new content as the one-pass merge found them: stored checksums among the
    bucket's or not, records of earlier, this and later rounds, a URL fetched twice, the
    page that holds the bytes itself."""
    checks = sorted({rnd.getrandbits(64) for _ in range(n_groups)})
    urls = [f"http://h.com/{i}" + ("?p" if i % 3 == 0 else "") for i in range(8)]
    groups = [(c, [probe(rnd.choice(urls), check=c) for _ in range(rnd.randint(1, 4))]) for c in checks]
    pool = checks + [rnd.getrandbits(64) for _ in range(n_stored)]
    stored = sorted(
        (c, ContentRecord(rnd.choice(urls), rnd.choice(["exact", "near"]), 1.0, "d", rnd.randrange(4), rnd.choice((None, 1, 2, 3))))
        for c in {rnd.choice(pool) for _ in range(n_stored)}
    )  # fmt: skip
    assert decide_checksums(groups, iter(stored), round_no) == per_pair.decide_checksums(groups, iter(stored), round_no)


def test_compact_simhash_rows_of_this_round_are_not_matches_but_of_an_earlier_one_are(any_store_uri):
    """The 19 compact cells carry no round: the first table's cell decides for all 20, so an
    original written by a crashed attempt of this very round is ignored on its rerun, and
    found by the next round, exactly as when every cell carried its round."""
    a = article(31)
    with open_store(any_store_uri) as store:
        store.mutate(
            SIMHASH_TABLE, simhash_cells(probe("http://crashed.org/a", simhash=textfp.html_simhash(html(a))), 3)
        )
    near = [page("http://x.org/a", html([*a[:50], "other", *a[51:]]))]
    got, _ = run(any_store_uri, near, round_no=3, record=False)
    assert got["http://x.org/a"][0] is None
    got, _ = run(any_store_uri, near, round_no=4, record=False)
    assert got["http://x.org/a"][:2] == ("http://crashed.org/a", "near")


def test_content_and_simhash_rows_written_as_json_find_copies_next_round(any_store_uri):
    """Rows of a round written as JSON, as before the binary cells, by the earlier encoders:
    the next round finds an exact copy (its original's date and digest kept) and a near copy."""
    import dataclasses as dc
    import json as js

    a = article(41)
    first = page("http://old.org/a", html(a), at=7.0)
    got, _ = run(any_store_uri, [first], round_no=1)
    with open_store(any_store_uri) as store:
        for table in (CONTENT_TABLE, SIMHASH_TABLE):
            rows = list(store.read_range(table))
            assert rows
            muts = []
            for key, cells in rows:
                new = {}
                for column, raw in cells.items():
                    if table == CONTENT_TABLE:
                        record = ContentRecord.from_cells(cells)
                        new[column] = js.dumps(dc.asdict(record), separators=(",", ":")).encode()
                    else:
                        url, written = simhash_value(raw)
                        new[column] = js.dumps({"url": url, "round": 1} if url else 1).encode()
                muts.append(Mutation.set(key, new))
            store.mutate(table, muts)
    exact = page("http://copy.org/a", html(a))
    near = page("http://near.org/a", html([*a[:60], "other", *a[61:]]))
    got, _ = run(any_store_uri, [exact, near], round_no=2, record=False)
    assert got["http://copy.org/a"][:2] == ("http://old.org/a", "exact")
    assert got["http://copy.org/a"][3] == 7.0
    assert got["http://near.org/a"][:2] == ("http://old.org/a", "near")


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 120), st.integers(1, 40), st.integers(1, 60), st.sampled_from([64, 1 << 20]))
def test_records_set_aside_in_runs_come_back_once_each_in_order(n, max_records, chunk, max_bytes):
    """Set aside a run of records at a time, the bundle's records come back from its files
    once each and in order, and a file holds about ``max_records`` of them (whole runs)."""
    records = [probe(f"http://h{i % 7}.test/{i}", i, simhash=i or None) for i in range(n)]
    with tempfile.TemporaryDirectory() as folder:
        fn = _SetAsideFn(folder, max_records, max_bytes, chunk=chunk)
        fn.start_bundle()
        refs = [ref for r in records for ref in fn.process(r)]
        refs += [wv.value for wv in fn.finish_bundle()]
        back = [read_set_aside(folder, ref) for ref in refs]
        assert len(refs) == len(os.listdir(folder))  # one reference a file, each file once
    assert [r for file in back for r in file] == records
    run = min(chunk, max_records)
    assert all(0 < len(file) <= -(-max_records // run) * run for file in back)
    if max_bytes == 64:  # a budget smaller than a record: a file each, as one record a run
        assert all(len(file) == 1 for file in back)


def _set_new_aside(folder: str | None, records: list[NewContent], max_records: int, bits: int = NEAR_PART_BITS):
    """``_SetNewAsideFn`` run over ``records`` as one bundle: its ``(part, item)`` outputs."""
    fn = _SetNewAsideFn(folder, bits, max_records)
    fn.start_bundle()
    out = [kv for r in records for kv in fn.process(r)]
    return out + [wv.value for wv in fn.finish_bundle()]


def test_new_checksums_are_read_back_from_their_part_and_a_bad_one_is_one_dead_letter(tmp_path):
    """The new checksums wait for the near copies in span files, a span per part: settling
    and naming take a part's spans joined with its decisions or pending pairs and read them
    back; one that fails to settle (a simhash that is no number) is one dead letter and the
    part's others are decided."""
    exact = NewContent(1, probe("http://a.com/", 1, simhash=7, batch="x"), (probe("http://b.com/", 1, batch="y z"),))
    bad = NewContent(2, dataclasses.replace(probe("http://c.com/", 2), simhash="zz"))
    near = NewContent(3, probe("http://d.com/", 3, simhash=9, batch="x"))
    records = [exact, bad, near]
    items = _set_new_aside(str(tmp_path), records, max_records=3)  # two spills: 2 probes, then 1 + 1 + 1
    parts = {near_part(r.first.url_fp) for r in records}
    assert {part for part, _ in items} == parts and len(os.listdir(tmp_path)) == 2
    by_part: dict[int, list] = {}
    for part, ref in items:
        by_part.setdefault(part, []).append(ref)
    d_fp = fingerprint("http://d.com/")
    decisions = {d_fp: ("http://original.com/", 2)}

    fn = _SettleFn("sqlite:///unused", 4, textfp.LAYOUT, record=False, folder=str(tmp_path))
    fn.setup()
    fn.start_bundle()
    out = []
    for part, refs in sorted(by_part.items()):
        near_here = [(fp, d) for fp, d in decisions.items() if near_part(fp) == part]
        out += list(fn.process((part, {NEW: refs, NEAR: near_here})))
    fn.finish_bundle()
    letters = [o.value for o in out if isinstance(o, beam.pvalue.TaggedOutput)]
    assert [(x.stage, x.url) for x in letters] == [("content_seen", "http://c.com/")]
    # Each copy goes to the batches its page waits in (b.com was fetched twice: two batches).
    b_copy = Copy("http://b.com/", "http://a.com/", "exact", 0, 1.0, "sha1:http://a.com/", "y z")
    assert sorted(o for o in out if not isinstance(o, beam.pvalue.TaggedOutput)) == sorted(
        [("y", b_copy), ("z", b_copy), ("x", Copy("http://d.com/", "http://original.com/", "near", 2, batch="x"))]
    )

    pending = [(d_fp, Evidence(crowded=True))]  # the pending candidates only
    part = near_part(d_fp)
    named = list(_NamePendingFn(str(tmp_path)).process((part, {NEW: by_part[part], PENDING: pending})))
    assert named == [(0, ("http://d.com/", d_fp, Evidence(crowded=True)))]
    # A part with none pending reads nothing back (its references may name any file).
    gone = [SpanRef("missing.spans", 0, 10)]
    assert list(_NamePendingFn(str(tmp_path)).process((part, {NEW: gone, PENDING: []}))) == []
    # Without staging a part's item is its run itself.
    runs = _set_new_aside(None, records, max_records=3)
    assert (
        list(_NamePendingFn(None).process((part, {NEW: [r for p, r in runs if p == part], PENDING: pending}))) == named
    )


@settings(max_examples=40, deadline=None)
@given(
    fps=st.lists(st.integers(min_value=0, max_value=(1 << 64) - 1), min_size=0, max_size=60, unique=True),
    others=st.lists(st.integers(min_value=0, max_value=3), min_size=60, max_size=60),
    max_records=st.integers(min_value=1, max_value=25),
    bits=st.sampled_from([0, 1, 4]),
    staged=st.booleans(),
)
def test_new_checksums_set_aside_come_back_once_each_in_the_part_of_their_url_fingerprint(
    fps, others, max_records, bits, staged
):
    """Whatever the spill size and part bits, every new checksum is read back exactly once,
    from its own part (the top bits of its candidate's URL fingerprint), in the bundle's order
    within a part; a span file is written at most once every ``max_records`` probes."""
    records = [
        NewContent(
            i,
            dataclasses.replace(probe(f"http://h{i}.com/", i), url_fp=fp),
            tuple(probe(f"http://c{i}-{j}.com/", i) for j in range(others[i])),
        )
        for i, fp in enumerate(fps)
    ]
    with tempfile.TemporaryDirectory() as folder:
        items = _set_new_aside(folder if staged else None, records, max_records, bits)
        back: dict[int, list[NewContent]] = {}
        for part, item in items:
            for run in _read_part(folder if staged else None, [item]):
                back.setdefault(part, []).extend(run)
        files = len(os.listdir(folder))
    assert sorted(r.checksum for run in back.values() for r in run) == list(range(len(records)))
    for part, run in back.items():
        assert all(near_part(r.first.url_fp, bits) == part for r in run)
        assert [r.checksum for r in run] == sorted(r.checksum for r in run)  # the bundle's order
    probes = sum(1 + len(r.others) for r in records)
    assert files <= (-(-probes // max_records) if staged else 0)
    assert all(0 <= part < (1 << bits) for part in back)
