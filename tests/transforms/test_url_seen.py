"""The DRUM merge: the plain sort-merge, then the transform against a real embedded store."""

from __future__ import annotations

import random

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamcrawl.schemas.records import Candidate, FrontierEntry, UrlState, fp_key
from beamcrawl.stores.base import Mutation, open_store
from beamcrawl.transforms.url_seen import (
    FilterSeenUrls,
    bucket_of,
    bucket_range,
    combine_candidates,
    merge_unseen,
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
    combined = combine_candidates([[cand(7, depth=3, priority=0.1)], [cand(7, depth=1, priority=0.9), cand(8)]])
    assert combined[7].inlinks == 2 and combined[7].depth == 1 and combined[7].priority == 0.9
    assert combined[8].inlinks == 1


def test_buckets_partition_the_key_space_in_order():
    bits = 4
    ranges = [bucket_range(b, bits) for b in range(1 << bits)]
    assert ranges[0][0] == fp_key(0) and ranges[-1][1] is None
    for (_, end), (start, _) in zip(ranges, ranges[1:]):
        assert end == start
    for fp in (0, 1, (1 << 63) + 5, (1 << 64) - 1):
        lo, hi = bucket_range(bucket_of(fp, bits), bits)
        assert lo <= fp_key(fp) and (hi is None or fp_key(fp) < hi)


class TestFilterSeenUrls:
    def test_only_never_seen_urls_reach_the_frontier(self, tmp_path):
        uri = f"sqlite:///{tmp_path}/store.sqlite"
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
            new = p | beam.Create(pages) | FilterSeenUrls(uri, bits=3, now_ms=5000)
            assert_that(new | beam.Map(lambda e: e.fp), equal_to(sorted(set(fresh) - set(seen))))

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
                new = p | beam.Create(pages) | FilterSeenUrls(uri, bits=2, now_ms=1)
                assert_that(new | beam.combiners.Count.Globally(), equal_to([expected]))
