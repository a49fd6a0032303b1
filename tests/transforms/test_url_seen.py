"""The DRUM merge: the plain sort-merge, then the transform against real stores.

The transform tests run on the embedded store and on Bigtable (the emulator); the scan and
key-set paths are each checked, by their results and by the url_seen counters.
"""

from __future__ import annotations

import dataclasses
import os
import random

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.utils.windowed_value import WindowedValue

from beamcrawl.schemas.candidate_block import CandidateBlock
from beamcrawl.schemas.records import Candidate, FrontierEntry, ParsedPage, UrlState, fp_key
from beamcrawl.stores.base import Mutation, open_store
from beamcrawl.stores.embedded import EmbeddedStore
from beamcrawl.transforms.dead_letter import collected
from beamcrawl.transforms.url_seen import (
    TARGET_CANDIDATES_PER_BUCKET,
    TARGET_KEYS_PER_BUCKET,
    QueueUnseenUrls,
    bucket_of,
    bucket_range,
    choose_bucket_bits,
    combine_candidates,
    merge_unseen,
    queue_new_urls,
)


def cand(fp: int, depth: int = 1, priority: float = 0.5) -> Candidate:
    return Candidate(fp=fp, url=f"http://h{fp % 7}.com/{fp}", host=f"h{fp % 7}.com", depth=depth, priority=priority)


def test_merge_unseen_is_a_one_pass_anti_join():
    rng = random.Random(3)
    stored = sorted(rng.sample(range(1 << 40), 2000))
    offered = sorted(set(rng.sample(stored, 300)) | set(rng.sample(range(1 << 40), 300)))
    new = list(merge_unseen([cand(f) for f in offered], (fp_key(s) for s in stored)))
    assert [c.fp for c in new] == [f for f in offered if f not in set(stored)]


def test_merge_reads_stored_keys_once_and_in_order():
    reads = []

    def keys():
        for k in (fp_key(v) for v in (1, 5, 9, 12)):
            reads.append(k)
            yield k

    new = [c.fp for c in merge_unseen([cand(v) for v in (2, 5, 12, 13)], keys())]
    assert new == [2, 13]
    assert reads == sorted(reads)


def test_combine_adds_inlinks_and_keeps_best_priority_and_depth():
    combined = combine_candidates([[cand(8), cand(7, depth=3, priority=0.1)], [cand(7, depth=1, priority=0.9)]])
    assert [c.fp for c in combined] == [7, 8]  # sorted by fingerprint
    assert combined[0].inlinks == 2 and combined[0].depth == 1 and combined[0].priority == 0.9
    assert combined[1].inlinks == 1


def test_buckets_partition_the_key_space_in_order():
    bits = 4
    ranges = [bucket_range(b, bits) for b in range(1 << bits)]
    assert ranges[0][0] == fp_key(0) and ranges[-1][1] is None
    for (_, end), (start, _) in zip(ranges, ranges[1:]):
        assert end == start
    for fp in (0, 1, (1 << 63) + 5, (1 << 64) - 1):
        lo, hi = bucket_range(bucket_of(fp, bits), bits)
        assert lo <= fp_key(fp) and (hi is None or fp_key(fp) < hi)


class TestQueueUnseenUrls:
    @pytest.mark.parametrize("set_aside", [False, True], ids=["blocks-shuffled", "blocks-set-aside"])
    def test_only_never_seen_urls_reach_the_frontier(self, tmp_path, set_aside):
        uri = f"sqlite:///{tmp_path}/store.sqlite"
        staging = str(tmp_path / "staging" / "candidateblocks") if set_aside else None
        rng = random.Random(11)
        seen = [(1 << 63) | rng.getrandbits(63) for _ in range(50)] + [rng.getrandbits(63) for _ in range(50)]
        with open_store(uri) as store:
            store.mutate("urls", [Mutation.set(fp_key(f), UrlState(url=f"http://x/{f}").to_cells()) for f in seen])
        fresh = [rng.getrandbits(64) for _ in range(80)]
        pages = [
            [cand(f) for f in seen[:30] + fresh[:40]],
            [cand(f) for f in seen[30:] + fresh[20:]],  # overlaps: combined per fingerprint
        ]
        with TestPipeline(runner="FnApiRunner") as p:
            new = (
                p | beam.Create(pages) | QueueUnseenUrls(uri, bits=3, now_ms=5000, staging=staging) | beam.FlatMap(list)
            )
            assert_that(new | beam.Map(lambda e: e.fp), equal_to(sorted(set(fresh) - set(seen))))
            assert_that(collected(p), equal_to([]), label="No dead letters")
        if set_aside:  # the blocks waited on disk: one span file per bundle's emission
            assert list((tmp_path / "staging" / "candidateblocks").glob("*.spans"))

        with open_store(uri) as store:
            frontier = [FrontierEntry.from_cells(c) for _, c in store.read_range("frontier")]
            urls = {k for k, _ in store.read_range("urls", keys_only=True)}
        expected_new = set(fresh) - set(seen)
        assert {e.fp for e in frontier} == expected_new
        assert all(e.due_ms == 5000 for e in frontier)
        inlinks = {e.fp: e.inlinks for e in frontier}
        for f in fresh[20:40]:
            assert inlinks[f] == 2  # offered by both pages
        assert urls == {fp_key(f) for f in set(seen) | expected_new}

    def test_rerun_queues_nothing_twice(self, tmp_path):
        uri = f"sqlite:///{tmp_path}/store.sqlite"
        pages = [[cand(f) for f in range(1000, 1100)]]
        for expected in (100, 0):
            with TestPipeline(runner="FnApiRunner") as p:
                new = p | beam.Create(pages) | QueueUnseenUrls(uri, bits=2, now_ms=1) | beam.FlatMap(list)
                assert_that(new | beam.combiners.Count.Globally(), equal_to([expected]))
                assert_that(collected(p), equal_to([]), label="No dead letters")


def test_blocks_set_aside_in_many_files_merge_as_the_shuffled_ones(tmp_path, monkeypatch):
    """Bundles that emit their blocks often (a low COMBINE_AT_MOST) write many span files,
    with offers of one URL in several of them: the merge reads each bucket's spans back and
    queues what the blocks crossing the shuffle queue, in-link counts and all."""
    from beamcrawl.transforms import url_seen

    monkeypatch.setattr(url_seen, "COMBINE_AT_MOST", 50)
    monkeypatch.setattr(url_seen, "COMBINE_BATCH", 20)
    rng = random.Random(5)
    fps = [rng.getrandbits(64) for _ in range(400)]
    pages = [[cand(f) for f in rng.sample(fps, 60)] for _ in range(30)]
    queued = {}
    for name, staging in (("shuffled", None), ("set_aside", str(tmp_path / "spans"))):
        uri = f"sqlite:///{tmp_path}/{name}.sqlite"
        with TestPipeline(runner="FnApiRunner") as p:
            _ = p | beam.Create(pages) | QueueUnseenUrls(uri, bits=2, now_ms=3, staging=staging)
            assert_that(collected(p), equal_to([]), label="No dead letters")
        with open_store(uri) as store:
            queued[name] = sorted(
                (e.fp, e.url, e.inlinks, e.depth, e.priority)
                for e in (FrontierEntry.from_cells(c) for _, c in store.read_range("frontier"))
            )
    assert len(list((tmp_path / "spans").glob("*.spans"))) > 2
    assert queued["set_aside"] == queued["shuffled"]
    assert sum(inlinks for _, _, inlinks, _, _ in queued["set_aside"]) == 30 * 60


def test_a_span_file_lost_before_the_merge_fails_the_round(tmp_path, monkeypatch):
    """The blocks are the round's own files: one gone is an infrastructure failure (the
    round is redone), never URLs silently not queued."""
    from beamcrawl.core.runtime import batch_files
    from beamcrawl.transforms import url_seen

    real = batch_files.read_spans

    def lost(folder, refs):
        for path in (tmp_path / "spans").glob("*.spans"):
            path.unlink()
        return real(folder, refs)

    monkeypatch.setattr(url_seen, "read_spans", lost)
    uri = f"sqlite:///{tmp_path}/store.sqlite"
    with pytest.raises(Exception, match="No such file|spans"):
        with TestPipeline(runner="FnApiRunner") as p:
            _ = (
                p
                | beam.Create([[cand(f) for f in range(100)]])
                | QueueUnseenUrls(uri, bits=2, now_ms=3, staging=str(tmp_path / "spans"))
            )
            assert_that(collected(p), equal_to([]), label="No dead letters")
    with open_store(uri) as store:
        assert not list(store.read_range("frontier"))


# --- at scale: bucket sizing, the scan and key-set paths, on both backends --------------


@pytest.fixture(params=["embedded", "bigtable"])
def store_uri(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "bigtable":
        return request.getfixturevalue("bigtable_uri")
    return f"sqlite:///{tmp_path}/store.sqlite"


def _seed_seen(uri: str, fps: list[int]) -> None:
    with open_store(uri) as store:
        store.mutate("urls", [Mutation.set(fp_key(f), UrlState(url=f"http://x/{f}").to_cells()) for f in fps])


def _run_filter(uri: str, pages: list[list[Candidate]], expected: list[int], **kw) -> dict[str, int]:
    """Runs QueueUnseenUrls, asserts the new fingerprints, returns the url_seen counters."""
    p = TestPipeline(runner="FnApiRunner")
    new = p | beam.Create(pages) | QueueUnseenUrls(uri, now_ms=7, **kw) | beam.FlatMap(list)
    assert_that(new | beam.Map(lambda e: e.fp), equal_to(expected))
    assert_that(collected(p), equal_to([]), label="No dead letters")
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace("url_seen"))["counters"]
    return {c.key.metric.name: c.committed for c in counters}


def test_choose_bucket_bits_follows_the_data():
    assert choose_bucket_bits(0) == 0
    assert choose_bucket_bits(0, min_bits=4) == 4
    assert choose_bucket_bits(TARGET_KEYS_PER_BUCKET) == 0
    assert choose_bucket_bits(TARGET_KEYS_PER_BUCKET + 1) == 1
    assert choose_bucket_bits(1000 * TARGET_KEYS_PER_BUCKET) == 10
    assert choose_bucket_bits(10, candidates=5 * TARGET_CANDIDATES_PER_BUCKET) == 3
    assert choose_bucket_bits(1 << 60) == 16  # capped
    assert choose_bucket_bits(1 << 60, max_bits=6) == 6


def test_bucket_count_is_sized_from_the_store(tmp_path):
    uri = f"sqlite:///{tmp_path}/store.sqlite"
    _seed_seen(uri, list(range(1, 1001)))
    small = QueueUnseenUrls(uri, bits=2, now_ms=1)
    big = QueueUnseenUrls(uri, bits=2, now_ms=1, seen_rows=50 * TARGET_KEYS_PER_BUCKET)
    with TestPipeline(runner="FnApiRunner") as p:
        pages = p | beam.Create([[cand(5)]])
        _ = pages | "small" >> small
        _ = pages | "big" >> big
        assert_that(collected(p), equal_to([]), label="No dead letters")
    assert small.seen_rows == 1000 and small.bits == 2  # the floor
    assert big.bits == 6  # 50 target-sized ranges need 64 buckets


def test_keyset_path_for_few_candidates_against_many_stored_keys(store_uri):
    rng = random.Random(21)
    stored = [rng.getrandbits(64) for _ in range(20_000)]
    _seed_seen(store_uri, stored)
    fresh = [rng.getrandbits(64) for _ in range(30)]
    pages = [[cand(f) for f in stored[:10] + fresh]]
    counters = _run_filter(store_uri, pages, sorted(fresh), bits=2, max_bits=2)
    # 4 buckets of ~5,000 stored keys and ~10 candidates each: reading 10 keys beats
    # scanning 5,000 on either backend.
    assert counters["path_keyset"] == counters["buckets"] == 4
    assert counters.get("path_scan", 0) == 0 and counters.get("keys_scanned", 0) == 0
    assert counters["keys_looked_up"] == 40
    assert counters["new"] == 30


def test_scan_path_when_candidates_outnumber_stored_keys(store_uri):
    rng = random.Random(22)
    stored = [rng.getrandbits(64) for _ in range(200)]
    _seed_seen(store_uri, stored)
    fresh = [rng.getrandbits(64) for _ in range(400)]
    pages = [[cand(f) for f in fresh[:200] + stored[:100]], [cand(f) for f in fresh[200:]]]
    counters = _run_filter(store_uri, pages, sorted(fresh), bits=2, max_bits=2)
    assert counters["path_scan"] == counters["buckets"] == 4
    assert counters.get("path_keyset", 0) == 0
    # Each bucket scans only the span between its first and last candidate, once.
    spans = {}
    for f in fresh + stored[:100]:
        lo, hi = spans.get(bucket_of(f, 2), (f, f))
        spans[bucket_of(f, 2)] = (min(lo, f), max(hi, f))
    in_spans = [s for s in stored if spans[bucket_of(s, 2)][0] <= s <= spans[bucket_of(s, 2)][1]]
    assert counters["keys_scanned"] == len(in_spans) > 150
    assert counters["new"] == 400


@pytest.mark.parametrize("path", ["scan", "keyset"])
def test_forced_paths_agree(tmp_path, path):
    uri = f"sqlite:///{tmp_path}/store.sqlite"
    rng = random.Random(23)
    stored = [rng.getrandbits(64) for _ in range(3000)]
    _seed_seen(uri, stored)
    offered = rng.sample(stored, 500) + [rng.getrandbits(64) for _ in range(500)]
    expected = sorted(set(offered) - set(stored))
    counters = _run_filter(uri, [[cand(f) for f in offered]], expected, bits=3, max_bits=3, path=path)
    assert counters[f"path_{path}"] == counters["buckets"]
    with open_store(uri) as store:
        queued = {FrontierEntry.from_cells(c).fp for _, c in store.read_range("frontier")}
    assert queued == set(expected)


class _WriteLog(EmbeddedStore):
    """A real embedded store that also records which table each write went to."""

    tables: list[str]

    def mutate(self, table, mutations):
        self.tables.append(table)
        super().mutate(table, mutations)

    def write_cells(self, table, cells):
        self.tables.append(table)
        super().write_cells(table, cells)


def test_new_urls_are_queued_before_they_are_marked_seen(tmp_path):
    store = _WriteLog(tmp_path / "s.sqlite")
    store.tables = []
    entries = queue_new_urls(store, [cand(f) for f in range(1, 4500)], now_ms=3)
    assert len(entries) == 4499
    # Each batch: frontier first, then urls; never a URL marked seen before it is queued.
    assert store.tables == ["frontier", "urls"] * 3
    store.close()


def test_new_urls_are_marked_seen_with_one_small_cell_that_loads_as_url_state(tmp_path):
    import json

    from beamcrawl.state.parquet_export import url_row
    from beamcrawl.schemas.records import QUEUED_CELL

    store = EmbeddedStore(tmp_path / "s.sqlite")
    new = [
        cand(5, depth=3, priority=0.125),
        Candidate(fp=9, url="http://h.com/r", host="h.com", depth=1, priority=0.5, source="redirect"),
    ]
    entries = queue_new_urls(store, new, now_ms=1234)
    rows = dict(store.read_range("urls"))
    # One cell per new URL, no null fields: not one per UrlState field.
    assert {k: list(c) for k, c in rows.items()} == {fp_key(5): [QUEUED_CELL], fp_key(9): [QUEUED_CELL]}
    state = UrlState.from_cells(rows[fp_key(5)])
    assert state == UrlState(url=new[0].url, first_seen_ms=1234, state="queued", source="link", depth=3)
    assert UrlState.from_cells(rows[fp_key(9)]).source == "redirect"
    # A fetch outcome's cells are merged into the row later; they win, the rest stays.
    store.mutate(
        "urls",
        [
            Mutation.set(
                fp_key(5),
                UrlState(url=new[0].url, state="fetched", status=200).to_cells(only=("url", "state", "status")),
            )
        ],
    )
    fetched = UrlState.from_cells(dict(store.read_range("urls"))[fp_key(5)])
    assert (fetched.state, fetched.status, fetched.first_seen_ms, fetched.depth) == ("fetched", 200, 1234, 3)
    # The export reads a queued row too.
    assert url_row(fp_key(9), rows[fp_key(9)])["url"] == "http://h.com/r"
    # The frontier row round-trips (binary, schemas/cells.py), as its JSON would.
    stored = dict(store.read_range("frontier"))
    for e in entries:
        assert FrontierEntry.from_cells(stored[e.key]) == e
        assert json.loads(e.to_json()) == dataclasses.asdict(e)
    store.close()


def test_seen_rows_written_one_cell_per_field_still_load():
    old = UrlState(url="http://a.com/x", first_seen_ms=7, source="seed", depth=0)
    cells = old.to_cells()  # every field: what rows written before the lean cell hold
    assert len(cells) == len(dataclasses.fields(UrlState)) and cells["u:status"] == b"null"
    assert UrlState.from_cells(cells) == old


# --- URL shape in front of the join -------------------------------------------------------------


def _page(*links: tuple[str, str], nofollow: bool = False) -> "ParsedPage":
    from beamcrawl.core.urls.urlnorm import fingerprint, normalize
    from beamcrawl.schemas.records import FetchResult, Link

    src = FrontierEntry(url="http://a.com/", fp=1, host="a.com", due_ms=0, depth=2)
    page = ParsedPage(fetch=FetchResult(entry=src, outcome="fetched", url=src.url, status=200))
    for url, kind in links:
        norm = normalize(url)
        page.links.append(Link(url=norm, fp=fingerprint(norm), kind=kind, nofollow=nofollow))
    return page


@pytest.mark.parametrize("target", ["http://b.com/sitemap.xml", "http://b.com/sitemap.xml.gz", "http://b.com/feed"])
def test_a_redirected_sitemap_or_feed_is_still_read_for_urls(target: str):
    """A sitemap (or feed) that moved keeps its kind at the redirect's target, gzipped or not;
    a page's redirect stays a page."""
    import dataclasses

    from beamcrawl.core.urls.urlshape import ShapeRules
    from beamcrawl.transforms.url_seen import page_candidates

    page = _page((target, "redirect"))
    page.fetch.entry = dataclasses.replace(page.fetch.entry, kind="sitemap", robots_origin="http://a.com")
    (cand,) = page_candidates(page, ShapeRules(), {})
    assert (cand.kind, cand.source, cand.hops, cand.robots_origin) == ("sitemap", "redirect", 1, "http://a.com")
    plain = _page(("http://b.com/moved.html", "redirect"))
    (cand,) = page_candidates(plain, ShapeRules(), {})
    assert cand.kind == "page"


def test_page_candidates_skip_bad_shapes_and_count_them():
    from beamcrawl.core.urls.urlshape import ShapeRules

    from beamcrawl.transforms.url_seen import page_candidates

    page = _page(
        ("http://a.com/ok.html", "a"),
        ("http://a.com/x/x/x/loop.html", "a"),
        ("http://a.com/photo.JPG", "a"),
        ("http://a.com/report.pdf", "redirect"),
        ("http://a.com/" + "y" * 200, "a"),
        ("http://a.com/canonical", "canonical"),
    )
    rejected: dict[str, int] = {}
    found = page_candidates(page, ShapeRules(max_length=100), rejected)
    assert [c.url for c in found] == ["http://a.com/ok.html"] and found[0].depth == 3
    assert rejected == {"repeated_segment": 1, "binary_extension": 2, "too_long": 1}
    allowed_docs = page_candidates(page, ShapeRules(skip_documents=False))
    assert [c.url for c in allowed_docs] == [
        "http://a.com/ok.html",
        "http://a.com/report.pdf",
        "http://a.com/" + "y" * 200,
    ]
    assert len(page_candidates(page)) == 5  # no rules: every followable link


def test_extract_candidates_counts_refusals_by_reason():
    from beamcrawl.core.urls.urlshape import ShapeRules
    from beamcrawl.schemas.records import PageBatch
    from beamcrawl.transforms.url_seen import ExtractCandidates

    pages = [_page(("http://a.com/ok", "a"), ("http://a.com/v.mp4", "a")), _page(("http://a.com/a/a/a", "a"))]
    p = TestPipeline(runner="FnApiRunner")
    out = p | beam.Create([PageBatch(pages)]) | ExtractCandidates(ShapeRules())
    # One block for the batch, as columns: the second page offers nothing (its one link is refused).
    assert_that(
        out | beam.Map(lambda block: (block.columnar, [c.url for c in block.to_candidates()])),
        equal_to([(True, ["http://a.com/ok"])]),
    )
    assert_that(collected(p), equal_to([]), label="No dead letters")
    result = p.run()
    result.wait_until_finish()
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace("url_seen"))["counters"]
    }
    assert counters["shape_binary_extension"] == 1 and counters["shape_repeated_segment"] == 1


# --- a bundle's combine holds a bounded number of fingerprints ------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from beamcrawl.transforms import url_seen  # noqa: E402


def _bucket_blocks(batches, monkeypatch, limit):
    monkeypatch.setattr(url_seen, "COMBINE_AT_MOST", limit)
    fn = url_seen._BucketFn(bits=2)
    fn.start_bundle()
    out = []
    for batch in batches:
        out += list(fn.process(batch))
        assert len(fn.held) < limit and len(fn.pending) < limit  # what a bundle holds is bounded
    out += [wv.value for wv in fn.finish_bundle()]
    assert all(isinstance(block, CandidateBlock) and block.columnar for _, block in out)
    return out


@settings(max_examples=60, deadline=None)
@given(
    offers=st.lists(
        st.tuples(
            st.integers(0, 40),
            st.sampled_from([0.1, 0.5, 1.0]),
            st.sampled_from(["link", "sitemap"]),
            st.integers(0, 4),
            st.lists(st.integers(0, 9), max_size=3),
        ),
        min_size=1,
        max_size=120,
    ),
    limit=st.integers(1, 20),
    cut=st.integers(1, 30),
)
def test_a_bundle_that_passes_its_blocks_on_early_queues_the_same_rows(offers, limit, cut):
    cands = [
        Candidate(
            fp=(fp * 0x9E3779B97F4A7C15) % 2**64,
            url=f"http://h.test/{fp}",
            host="h.test",
            depth=d,
            priority=prio,
            source=src,
            inlink_hosts=tuple(sorted(set(hosts))),
        )
        for fp, prio, src, d, hosts in offers
    ]
    batches = [cands[i : i + cut] for i in range(0, len(cands), cut)]
    with pytest.MonkeyPatch.context() as mp:
        early = _bucket_blocks(batches, mp, limit)
    with pytest.MonkeyPatch.context() as mp:
        whole = _bucket_blocks(batches, mp, 10**9)
    assert len(whole) <= 4 and all(len(set(block.fp.tolist())) == len(block) for _, block in whole)
    for bucket, block in early:
        assert all(url_seen.bucket_of(f, 2) == bucket for f in block.fp.tolist())
    # the merge combines every block of a bucket: the same rows either way, and the rows
    # the pairwise merge makes of all the offers
    rows = url_seen.combine_blocks([b for _, b in early]).to_candidates()
    assert rows == url_seen.combine_blocks([b for _, b in whole]).to_candidates()
    _same(rows, _reference_combine([cands]))
    if len({c.fp for c in cands}) >= limit:
        assert sum(len(block) for _, block in early) >= len({c.fp for c in cands})


def _unwrap(value):
    """An output of process() as it is, one of finish_bundle() out of its window."""
    return value.value if isinstance(value, WindowedValue) else value


def test_a_bundle_offered_the_same_urls_again_and_again_holds_what_it_keeps():
    """Combined blocks refer to their offers' buffers; the URLs of offers combined away are
    let go, so a bundle whose pages all link to the same few URLs does not grow."""
    nav = [dataclasses.replace(cand(f), inlink_hosts=(f,)) for f in range(100)]
    fn = url_seen._BucketFn(bits=0)
    fn.start_bundle()
    for _ in range(400):
        assert not list(fn.process(nav))
    assert len(fn.held) == 100 and fn.held.used() > 0
    assert fn.held.buffered() <= 2 * fn.held.used() + 4096
    ((_, block),) = [wv.value for wv in fn.finish_bundle()]
    assert [c.inlinks for c in block.to_candidates()] == [400] * 100


def test_a_bundle_takes_a_list_of_any_length_and_sets_aside_a_bad_fingerprint():
    """A batch of pages' candidates is one list: combined as one. A candidate whose
    fingerprint is not a 64-bit int is one dead letter; the others go on."""
    cands = [cand(f) for f in range(20_000)] * 2 + [dataclasses.replace(cand(3), fp=-3), cand(2**64 - 1)]
    fn = url_seen._BucketFn(bits=1)
    fn.start_bundle()
    out = list(fn.process(cands)) + list(fn.finish_bundle())
    letters = [_unwrap(o.value) for o in out if isinstance(o, beam.pvalue.TaggedOutput)]
    blocks = [_unwrap(o) for o in out if not isinstance(o, beam.pvalue.TaggedOutput)]
    assert len(letters) == 1 and letters[0].url == "http://h3.com/3" and letters[0].stage == "url_seen"
    assert [b for b, _ in blocks] == [0, 1]
    rows = url_seen.combine_blocks([block for _, block in blocks]).to_candidates()
    assert [c.fp for c in rows] == [*range(20_000), 2**64 - 1]
    assert all(c.inlinks == 2 for c in rows[:-1]) and rows[-1].inlinks == 1


# --- the numpy combine and merge decide as the per-offer ones did ---------------------------

import math  # noqa: E402

import url_seen_reference as before  # noqa: E402

_FIELDS = [f.name for f in dataclasses.fields(Candidate)]


def _same(new: list[Candidate], old: list[Candidate]) -> None:
    """Equal records, field by field, of the same Python types (numpy scalars would pickle
    and print differently)."""
    assert new == old
    for a, b in zip(new, old):
        for name in _FIELDS:
            assert type(getattr(a, name)) is type(getattr(b, name)), name
        assert all(type(h) is int for h in a.inlink_hosts)


_HOSTS_SORTED = st.lists(st.integers(0, 2**32 - 1), max_size=5, unique=True).map(lambda h: tuple(sorted(h)))
_HOSTS_ANY = st.one_of(
    _HOSTS_SORTED,
    st.lists(st.integers(0, 99), max_size=4).map(tuple),  # unsorted, repeated: not made by merge
    st.lists(st.integers(0, 200), min_size=60, max_size=70, unique=True).map(lambda h: tuple(sorted(h))),
)


@st.composite
def offers(draw, hosts=_HOSTS_SORTED, big=False):
    """Lists of offers (bundle lists) of few fingerprints, so that many combine, with ties in
    priority and lastmod, both signs of zero, and robots.txt origins."""
    fps = draw(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=8, unique=True))
    count = st.integers(0, 2**70) if big else st.integers(0, 50)
    one = st.builds(
        lambda fp, url, depth, prio, src, kind, n, h, hops, lm, origin: Candidate(
            fp=fp,
            url=url,
            host="h.test",
            depth=depth,
            priority=prio,
            source=src,
            inlinks=n,
            inlink_hosts=h,
            kind=kind,
            hops=hops,
            lastmod=lm,
            robots_origin=origin,
        ),  # fmt: skip
        st.sampled_from(fps),
        st.sampled_from(["http://h.test/a", "http://h.test/b"]),
        st.integers(0, 9),
        st.one_of(st.sampled_from([0.0, -0.0, 0.25, 0.5, 1.0]), st.floats(0, 1)),
        st.sampled_from(["link", "sitemap", "feed", "redirect", "seed"]),
        st.sampled_from(["page", "sitemap", "feed"]),
        count,
        hosts,
        st.integers(0, 5),
        st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.7e9, 1.8e9]), st.floats(-1e10, 1e10)),
        st.sampled_from([None, "", "http://a.test", "http://b.test", "https://a.test"]),
    )
    return draw(st.lists(st.lists(one, max_size=30), min_size=1, max_size=4))


def _reference_combine(groups: list[list[Candidate]]) -> list[Candidate]:
    folded = before.combine_candidates(groups)
    return [folded[fp] for fp in sorted(folded)]


@settings(max_examples=400, deadline=None)
@given(offers())
def test_numpy_combine_is_the_pairwise_merge(groups):
    """The array combine gives, per fingerprint, the offer Candidate.merge folded to: the
    first offer's URL and host, the least depth and hops, the summed in-links, the smallest
    64 linking hosts, the best (priority, source, kind) and the latest lastmod (ties to the
    first offer), the least robots.txt origin; sorted by fingerprint."""
    _same(combine_candidates(groups), _reference_combine(groups))


@settings(max_examples=200, deadline=None)
@given(offers(hosts=_HOSTS_ANY, big=True))
def test_values_the_arrays_cannot_hold_combine_as_before(groups):
    """Unsorted or repeated hosts tuples, over 64 hosts, in-link counts past 64 bits: the
    same result (by the pairwise merge)."""
    _same(combine_candidates(groups), _reference_combine(groups))


def test_a_nan_priority_combines_as_before():
    a = Candidate(fp=5, url="http://h.test/", host="h.test", depth=1, priority=math.nan)
    b = dataclasses.replace(a, priority=0.5, depth=0)
    for groups in ([[a, b]], [[b, a]]):
        new, old = combine_candidates(groups)[0], _reference_combine(groups)[0]
        assert repr(new) == repr(old)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 2**64 - 1), max_size=60, unique=True),
    st.lists(st.integers(0, 2**64 - 1), max_size=60, unique=True),
    st.randoms(use_true_random=False),
    st.booleans(),
)
def test_numpy_merge_is_the_one_pass_anti_join(offered, stored_only, rnd, odd_keys):
    """The searchsorted merge finds what the one-pass merge found, whatever the overlap,
    with the stored keys in any order and in chunks, and keys of another length matching
    nothing."""
    both = rnd.sample(offered, len(offered) // 2)
    stored = sorted(set(stored_only) | set(both))
    cands = [cand(f) for f in sorted(offered)]
    old = list(before.merge_unseen(cands, (fp_key(s) for s in stored)))
    keys = [fp_key(s) for s in stored] + ([b"\x00" * 7, b"\x01" * 9] if odd_keys else [])
    rnd.shuffle(keys)
    assert url_seen.merge_unseen(cands, keys) == old
    chunks = [keys[i : i + 3] for i in range(0, len(keys), 3)]
    seen = url_seen.seen_mask(url_seen.fingerprints(cands), chunks)
    assert [c for c, s in zip(cands, seen) if not s] == old


def test_bucket_lists_cut_sorted_candidates_where_the_top_bits_change():
    rng = random.Random(5)
    ordered = combine_candidates([[cand(rng.getrandbits(64)) for _ in range(500)]])
    for bits in (0, 1, 3, 16):
        lists = list(url_seen.bucket_lists(ordered, bits))
        assert [c for _, lst in lists for c in lst] == ordered
        assert all(bucket_of(c.fp, bits) == b for b, lst in lists for c in lst)
        assert [b for b, _ in lists] == sorted({bucket_of(c.fp, bits) for c in ordered})


# --- the columnar combine and merge decide as the object ones do -----------------------------


def _blocks(groups: list[list[Candidate]]) -> list[CandidateBlock]:
    return [CandidateBlock.from_candidates(g) for g in groups]


@settings(max_examples=400, deadline=None)
@given(offers(), st.booleans())
def test_columnar_combine_is_the_pairwise_merge(groups, singles):
    """Blocks combined as columns give what Candidate.merge folds the same offers to, in the
    same order (ties to the first offer), with no object made on the way: the object path
    is not taken for these values. Blocks of one offer each, too."""
    if singles:
        groups = [[c] for g in groups for c in g] or [[]]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(url_seen, "combine_candidates", _no_objects)
        combined = url_seen.combine_blocks(_blocks(groups))
    assert combined.columnar
    _same(combined.to_candidates(), _reference_combine(groups))
    _same(combined.to_candidates(), combine_candidates(groups))
    # A combined block's rows are what the next combine and the coder take.
    _same(CandidateBlock.decode(combined.encode()).to_candidates(), combined.to_candidates())
    again = url_seen.combine_blocks([combined, CandidateBlock.from_candidates(groups[0])])
    _same(again.to_candidates(), _reference_combine([*groups, groups[0]]))


@pytest.mark.parametrize("zeros", [(-0.0, 0.0), (0.0, -0.0)])
def test_ties_in_columns_go_to_the_first_offer(zeros):
    """Equal priorities and lastmods of both signs of zero: the first offer's sign is kept,
    as the pairwise merge keeps its left side (values alike otherwise tell no difference)."""
    a = Candidate(fp=4, url="http://h.test/", host="h.test", depth=1, priority=zeros[0], lastmod=zeros[0])
    b = dataclasses.replace(a, priority=zeros[1], lastmod=zeros[1], depth=0)
    groups = [[a], [dataclasses.replace(a, lastmod=None, priority=-1.0)], [b]]
    (row,) = url_seen.combine_blocks(_blocks(groups)).to_candidates()
    (expected,) = _reference_combine(groups)
    _same([row], [expected])
    assert math.copysign(1, row.lastmod) == math.copysign(1, zeros[0])
    assert math.copysign(1, row.priority) == math.copysign(1, zeros[0])


def _no_objects(groups):
    raise AssertionError("the object path was taken")


@settings(max_examples=200, deadline=None)
@given(offers(hosts=_HOSTS_ANY, big=True))
def test_values_the_columns_cannot_combine_combine_as_before(groups):
    """Unsorted or repeated hosts tuples, over 64 hosts, in-link counts past 64 bits (those
    blocks hold objects): the same result, by the object path."""
    _same(url_seen.combine_blocks(_blocks(groups)).to_candidates(), _reference_combine(groups))


@settings(max_examples=100, deadline=None)
@given(offers(), st.integers(0, 3), st.sampled_from([math.nan, math.inf, -math.inf]))
def test_a_priority_that_does_not_order_combines_as_before(groups, at, odd):
    groups = [list(g) for g in groups]
    flat = [c for g in groups for c in g]
    if flat:
        victim = flat[at % len(flat)]
        groups = [[dataclasses.replace(c, priority=odd) if c is victim else c for c in g] for g in groups]
    new, old = url_seen.combine_blocks(_blocks(groups)).to_candidates(), _reference_combine(groups)
    assert repr(new) == repr(old)


def test_sums_past_64_bits_in_columns_combine_as_before():
    big = Candidate(fp=9, url="http://h.test/", host="h.test", depth=1, priority=0.5, inlinks=2**62)
    groups = [[big], [big], [dataclasses.replace(big, inlinks=-(2**62))]]
    blocks = _blocks(groups)
    assert all(b.columnar for b in blocks)
    (row,) = url_seen.combine_blocks(blocks).to_candidates()
    assert row.inlinks == 2**62 and type(row.inlinks) is int


def _bucket_store(tmp_path, seen: list[int], dated: dict[int, float] | None = None) -> str:
    uri = f"sqlite:///{tmp_path}/store.sqlite"
    _seed_seen(uri, seen)
    return uri


def _run_merge(uri: str, blocks: list[CandidateBlock]) -> tuple[list[FrontierEntry], list]:
    fn = url_seen._MergeBucketFn(uri, bits=0, now_ms=11, seen_rows=0, keyset_cost_ratio=1.0, path="auto")
    fn.setup()
    try:
        out = list(fn.process((0, blocks)))
    finally:
        fn.teardown()
    letters = [o.value for o in out if isinstance(o, beam.pvalue.TaggedOutput)]
    entries = [e for o in out if not isinstance(o, beam.pvalue.TaggedOutput) for e in o]
    return entries, letters


def test_merge_builds_entries_for_new_fingerprints_only(tmp_path, monkeypatch):
    rng = random.Random(31)
    known = [rng.getrandbits(64) for _ in range(300)]
    fresh = [rng.getrandbits(64) for _ in range(200)]
    uri = _bucket_store(tmp_path, known)
    groups = [[cand(f) for f in known[:200] + fresh[:150]], [cand(f, depth=0) for f in known[100:] + fresh[100:]]]
    built = []
    to_candidates = CandidateBlock.to_candidates
    monkeypatch.setattr(CandidateBlock, "to_candidates", lambda self, rows=None: built.append(
        len(self) if rows is None else len(rows)) or to_candidates(self, rows))  # fmt: skip
    entries, letters = _run_merge(uri, _blocks(groups))
    assert letters == [] and sum(built) == len(fresh)  # the known ones stay columns
    assert sorted(e.fp for e in entries) == sorted(fresh)
    by_fp = {e.fp: e for e in entries}
    for f in fresh[100:150]:
        assert by_fp[f].inlinks == 2 and by_fp[f].depth == 0
    with open_store(uri) as store:
        assert {FrontierEntry.from_cells(c).fp for _, c in store.read_range("frontier")} == set(fresh)


def test_a_bucket_whose_blocks_will_not_merge_sets_aside_only_the_bad_candidate(tmp_path):
    """Two blocks of objects whose offers of one URL cannot be merged (a depth of None):
    that candidate is one dead letter, the bucket's other new URLs are queued."""
    uri = _bucket_store(tmp_path, [1, 2])
    bad = dataclasses.replace(cand(77), depth=None)
    first = [cand(1), cand(10), bad, cand(11)]
    second = [cand(2), cand(77), cand(12), dataclasses.replace(cand(13), inlinks=2**70)]
    blocks = _blocks([first, second])
    assert not any(b.columnar for b in blocks)
    entries, letters = _run_merge(uri, blocks)
    assert [(d.url, d.exception) for d in letters] == [("http://h0.com/77", "TypeError")]
    assert sorted(e.fp for e in entries) == [10, 11, 12, 13, 77]  # the good offer of 77 alone


# --- a redirect's Retry-After -------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    status=st.sampled_from((301, 302, 303, 307, 308)),
    form=st.sampled_from(("seconds", "date", "invalid")),
    wait=st.integers(1, 3 * 24 * 3600),
    same_host=st.booleans(),
    linked=st.integers(0, 3),
    first=st.booleans(),
)
def test_a_redirects_target_is_queued_due_when_its_retry_after_ends(status, form, wait, same_host, linked, first):
    """RFC 9110 §10.2.3: a Retry-After sent with a 3xx is the least wait before the redirected
    request. The target is queued due when the wait ends (capped as every Retry-After is),
    whatever other offers of the same URL it combines with on the way, in any order; a value
    that is neither form is ignored, as elsewhere, and the target is due at once."""
    import email.utils
    import math
    import tempfile

    import numpy as np

    from beamcrawl.core.policy.politeness import RETRY_AFTER_CAP
    from beamcrawl.core.urls.urlnorm import fingerprint
    from beamcrawl.schemas.records import FetchResult, Link
    from beamcrawl.state.frontier import queue_new_block
    from beamcrawl.transforms.url_seen import combine_blocks, page_offers

    end = 1_800_000_000.25  # when the redirect's response ended
    now_ms = int(end * 1000) + 30_000  # the round that queues it, half a minute later
    if form == "seconds":
        value, hold = str(wait), end + min(wait, RETRY_AFTER_CAP)
    elif form == "date":
        at = math.ceil(end) + wait
        value, hold = email.utils.formatdate(at, usegmt=True), min(at, end + RETRY_AFTER_CAP)
    else:
        value, hold = ("soon", "1.5", "-3", "\u00b2", "Mon, 99 Foo 2026 00:00:00 GMT")[wait % 5], None
    target = "http://a.com/moved" if same_host else "http://b.com/moved"
    src = FrontierEntry(url="http://a.com/old", fp=1, host="a.com", due_ms=0, depth=1)
    result = FetchResult(
        entry=src, outcome="fetched", url=src.url, status=status, fetched_at=end - 0.05, elapsed=0.05,
        response_headers=[("Location", target), ("Retry-After", value)],
    )  # fmt: skip
    page = ParsedPage(fetch=result)
    page.links.append(Link(url=target, fp=fingerprint(target), kind="redirect"))
    redirect = CandidateBlock.from_rows(page_offers(page))
    # The same URL linked from other pages: offers without a hold, as columns.
    links = CandidateBlock.from_candidates(
        [Candidate(fp=fingerprint(target), url=target, host=target[7:12], depth=3, priority=0.4)] * linked
    )
    blocks = [redirect, links] if first else [links, redirect]
    merged = combine_blocks([CandidateBlock.decode(b.encode()) for b in blocks])
    with tempfile.TemporaryDirectory() as tmp:
        store = EmbeddedStore(f"{tmp}/s.sqlite")
        (entry,) = list(queue_new_block(store, merged, np.arange(len(merged)), now_ms))
        (key,) = [row[0] for row in store.read_range("frontier", keys_only=True)]
        store.close()
    assert entry.key == key
    if hold is None or hold * 1000 <= now_ms:
        assert entry.due_ms == now_ms
    else:
        assert entry.due_ms >= hold * 1000 and entry.due_ms - hold * 1000 < 1


# --- a redirect's Retry-After on a target already known ------------------------------------------

NOW_MS = 1_800_000_000_000  # the round that finds the redirect


def _known(store, fp: int, how: str, due_ms: int) -> list[int]:
    """Makes a URL known to the store as ``how`` with its visit due at ``due_ms``; returns the
    due times of its frontier rows (none for one fetched with nothing pending)."""
    from beamcrawl.core.policy.change_rate import RevisitState
    from beamcrawl.schemas.records import revisit_cell

    url, host = f"http://h{fp % 5}.test/{fp}", f"h{fp % 5}.test"
    if how in ("queued", "held"):
        # Queued new by a link in an earlier round; "held": by an earlier redirect's hold.
        first = due_ms if how == "queued" else NOW_MS - 60_000
        hold = due_ms / 1000 if how == "held" else None
        (entry,) = queue_new_urls(
            store, [Candidate(fp=fp, url=url, host=host, depth=1, priority=0.5, not_before=hold)], first
        )
        return [entry.due_ms]
    state = RevisitState()
    state.next_due = due_ms / 1000
    revisit = state.to_dict()
    cells = UrlState.discovered_cells(url, NOW_MS - 86_400_000, "link", 1)
    cells["u:revisit"] = revisit_cell(revisit)
    store.mutate("urls", [Mutation.set(fp_key(fp), cells)])
    if how == "fetched":  # its revisit's time is past and its row gone: nothing pending
        return []
    entry = FrontierEntry(url=url, fp=fp, host=host, due_ms=due_ms, source="revisit", revisit=revisit)
    store.mutate("frontier", [Mutation.set(entry.key, entry.to_cells())])
    return [due_ms]


def _redirect_round(uri: str, out, offers: list[Candidate], fetched: dict[int, tuple[int, int]]) -> None:
    """URL seen's merge of ``offers`` with the store, then the round's commit. ``fetched``:
    URLs this round fetched, fp → (the row it fetched, its next visit's due)."""
    from beamcrawl.core.runtime.outputs import DONE, HOLDS, REQUEUE, RoundOutputs
    from beamcrawl.pipelines.commit import commit_round
    from beamcrawl.state.frontier import requeue_text

    outputs = RoundOutputs(str(out), 1)
    fn = url_seen._MergeBucketFn(
        uri, bits=0, now_ms=NOW_MS, seen_rows=0, keyset_cost_ratio=1.0, path="keyset",
        lastmod_hints=False, holds_staging=outputs.staged(HOLDS),
    )  # fmt: skip
    fn.setup()
    try:
        list(fn.process((0, [CandidateBlock.from_candidates(offers)])))
    finally:
        fn.teardown()
    done, requeue = [], []
    with open_store(uri) as store:
        rows = store.read_keys(
            "frontier", [FrontierEntry(url="", fp=fp, host="", due_ms=d).key for fp, (d, _) in fetched.items()]
        )
        for fp, (due_ms, next_ms) in fetched.items():
            key = FrontierEntry(url="", fp=fp, host="", due_ms=due_ms).key
            entry = FrontierEntry.from_cells(rows[key])
            done.append(key.hex())
            requeue.append(requeue_text(dataclasses.replace(entry, due_ms=next_ms, source="revisit")))
        for kind, lines in ((DONE, done), (REQUEUE, requeue)):
            if lines:
                path = outputs.staged(kind)
                os.makedirs(path, exist_ok=True)
                with open(f"{path}/part-0.txt", "w") as fh:
                    fh.write("\n".join(lines) + "\n")
        commit_round(store, outputs)


def _pending(uri: str) -> dict[int, list[int]]:
    """Every URL's frontier rows' due times, fp → sorted."""
    from beamcrawl.schemas.records import key_fp

    out: dict[int, list[int]] = {}
    with open_store(uri) as store:
        for key, _cells in store.read_range("frontier"):
            out.setdefault(key_fp(key[8:]), []).append(key_fp(key[:8]))
    return {fp: sorted(d) for fp, d in out.items()}


def _offer(fp: int, hold_ms: int | None) -> Candidate:
    return Candidate(
        fp=fp, url=f"http://h{fp % 5}.test/{fp}", host=f"h{fp % 5}.test", depth=1, priority=0.5, source="redirect", kind="page", hops=1,
        not_before=None if hold_ms is None else hold_ms / 1000,
    )  # fmt: skip


def test_a_known_targets_earlier_visit_is_moved_to_its_redirects_hold(store_uri, tmp_path):
    """RFC 9110 §10.2.3 on a redirect to a URL already queued: the queued visit (due now, by
    a link an earlier round found) and a scheduled revisit due before the hold are moved to
    the hold; a revisit due after it stays; a new target is queued due at its hold as before."""
    hold = NOW_MS + 20_000
    with open_store(store_uri) as store:
        _known(store, 1, "queued", NOW_MS - 30_000)
        _known(store, 2, "revisit", NOW_MS + 5_000)
        _known(store, 3, "revisit", NOW_MS + 3_600_000)
    _redirect_round(store_uri, tmp_path / "out", [_offer(fp, hold) for fp in (1, 2, 3, 4)], {})
    assert _pending(store_uri) == {1: [hold], 2: [hold], 3: [NOW_MS + 3_600_000], 4: [hold]}


def test_a_known_target_fetched_this_round_is_next_due_at_its_hold(store_uri, tmp_path):
    """The target was fetched this round before the redirect's answer came: that request
    stands, and its next visit (a quick retry) is written due at the hold, not before."""
    hold = NOW_MS + 20_000
    with open_store(store_uri) as store:
        _known(store, 1, "queued", NOW_MS - 30_000)
    _redirect_round(store_uri, tmp_path / "out", [_offer(1, hold)], {1: (NOW_MS - 30_000, NOW_MS + 2_000)})
    assert _pending(store_uri) == {1: [hold]}


def test_a_target_held_by_two_redirects_waits_for_the_later_hold(store_uri, tmp_path):
    """A hold still in force from an earlier redirect (its queued visit there, noted in the
    seen set) stands with a new, earlier one: a revisit due before either is moved to the
    later, not to the new one between the two."""
    from beamcrawl.core.policy.change_rate import RevisitState
    from beamcrawl.schemas.records import revisit_cell

    first_hold, revisit_ms, new_hold = NOW_MS + 60_000, NOW_MS + 5_000, NOW_MS + 20_000
    with open_store(store_uri) as store:
        _known(store, 1, "held", first_hold)
        state = RevisitState()
        state.next_due = revisit_ms / 1000
        store.mutate("urls", [Mutation.set(fp_key(1), {"u:revisit": revisit_cell(state.to_dict())})])
        entry = FrontierEntry(url="http://h1.test/1", fp=1, host="h1.test", due_ms=revisit_ms, source="revisit")
        store.mutate("frontier", [Mutation.set(entry.key, entry.to_cells())])
    _redirect_round(store_uri, tmp_path / "out", [_offer(1, new_hold)], {})
    assert _pending(store_uri) == {1: [first_hold]}


HOW = st.sampled_from(("new", "queued", "held", "revisit", "fetched", "fetched_now"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    urls=st.lists(
        st.tuples(
            HOW,
            st.integers(-3_600_000, 3_600_000),  # its visit's due, from now (ms)
            st.one_of(st.none(), st.integers(-60_000, 86_400_000)),  # its redirect's hold, from now
            st.integers(-60_000, 120_000),  # fetched this round: its next visit, from now
        ),
        min_size=1,
        max_size=8,
    )
)
def test_no_held_targets_visit_is_due_before_its_hold_and_none_is_moved_earlier(store_uri, tmp_path_factory, urls):
    uri = store_uri
    if uri.startswith("sqlite"):  # a fresh store per example
        uri = f"sqlite:///{tmp_path_factory.mktemp('store')}/store.sqlite"
    base = random.Random(str(urls)).getrandbits(40) << 8  # the example's own URLs on a shared store
    earlier: dict[int, list[int]] = {}
    fetched: dict[int, tuple[int, int]] = {}
    offers, holds = [], {}
    with open_store(uri) as store:
        for i, (how, due, hold, next_due) in enumerate(urls):
            fp = base + i
            if how == "held" and due <= 0:
                how = "queued"  # a hold queues a new URL due when it ends, later than found
            if how == "fetched_now":  # queued earlier, fetched this round, its next visit staged
                earlier[fp] = _known(store, fp, "queued", NOW_MS - 1_000 - abs(due))
                fetched[fp] = (earlier[fp][0], NOW_MS + next_due)
                earlier[fp] = [NOW_MS + next_due]
            elif how != "new":
                earlier[fp] = _known(store, fp, how, NOW_MS + due)
            holds[fp] = None if hold is None else NOW_MS + hold
            offers.append(_offer(fp, holds[fp]))
    _redirect_round(uri, tmp_path_factory.mktemp("out"), offers, fetched)
    after = _pending(uri)
    for fp, hold_ms in holds.items():
        got = after.get(fp, [])
        if fp not in earlier:  # new: queued due at once, or when its hold ends
            due = NOW_MS if hold_ms is None else max(NOW_MS, math.ceil(hold_ms / 1000 * 1000))
            assert got == [due]
        elif hold_ms is None or hold_ms <= NOW_MS:
            assert got == earlier[fp]  # nothing to wait for: left as it was
        else:
            held = math.ceil(hold_ms / 1000 * 1000)
            assert got == sorted({max(d, held) for d in earlier[fp]})
