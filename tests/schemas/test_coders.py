"""schemas/coders.py: the records' Beam coders, what they cost, and the types transforms declare."""

from __future__ import annotations

import pickle

import apache_beam as beam
import pytest
from apache_beam.coders import FastPrimitivesCoder
from apache_beam.typehints import Any as AnyHint
from hypothesis import given
from hypothesis import strategies as st
from test_shuffled_records import RECORDS  # tests/schemas/test_shuffled_records.py

from beamcrawl.schemas.candidate_block import CandidateBlockCoder
from beamcrawl.schemas.coders import DueRowsCoder, PackedCoder, RecordCoder
from beamcrawl.schemas.records import Candidate, FrontierEntry, HostRecord, Packed, shuffled_classes

# The records of schemas/records.py (those a stage's own module defines keep the fallback coder).
RECORD_SAMPLES = [r for r in RECORDS if type(r) in shuffled_classes() and type(r).__module__.endswith("records")]


def _fallback_size(value: object) -> int:
    """Bytes today: Beam's coder for an element it knows nothing of (``Any``)."""
    return len(beam.coders.registry.get_coder(AnyHint).encode(value))


@pytest.mark.parametrize("record", RECORD_SAMPLES, ids=lambda r: type(r).__name__)
def test_each_record_class_has_a_coder_that_round_trips_it_in_no_more_bytes(record):
    coder = beam.coders.registry.get_coder(type(record))
    assert coder == RecordCoder(type(record))
    encoded = coder.encode(record)
    assert coder.decode(encoded) == record
    # The class is the coder's, so its name is not written: never more than today's pickle.
    assert len(encoded) <= _fallback_size(record)
    assert isinstance(beam.coders.registry.get_coder(AnyHint), FastPrimitivesCoder)


@given(
    st.lists(
        st.builds(
            Candidate,
            fp=st.integers(0, (1 << 64) - 1),
            url=st.text(max_size=40),
            host=st.text(max_size=10),
            depth=st.integers(0, 50),
            priority=st.floats(allow_nan=False),
        ),
        max_size=30,
    )
)
def test_a_packed_list_crosses_as_its_own_pickle(cands):
    packed = Packed(cands)
    coder = beam.coders.registry.get_coder(Packed)
    assert coder == PackedCoder()
    encoded = coder.encode(packed)
    assert encoded == pickle.dumps(packed, pickle.HIGHEST_PROTOCOL)
    back = coder.decode(encoded)
    assert type(back) is Packed and back == packed
    assert len(encoded) <= _fallback_size(packed)


def test_a_value_of_another_type_still_round_trips():
    coder = RecordCoder(FrontierEntry)
    for value in (HostRecord(host="h"), {"a": 1}, None):
        assert coder.decode(coder.encode(value)) == value


def test_the_shuffled_collections_declare_their_types():
    from beamcrawl.transforms.select import ReadDueFrontier
    from beamcrawl.transforms.url_seen import QueueUnseenUrls

    p = beam.Pipeline(runner="FnApiRunner")
    due = p | ReadDueFrontier("sqlite:////nonexistent/store.sqlite", 0)
    assert beam.coders.registry.get_coder(due.element_type) == beam.coders.TupleCoder(
        [beam.coders.StrUtf8Coder(), DueRowsCoder()]
    )
    seen = QueueUnseenUrls("sqlite:////nonexistent/store.sqlite", 2, 0, seen_rows=0, keyset_cost_ratio=1.0)
    _ = p | "Lists" >> beam.Create([Packed()]) | seen
    bucketed = [
        node.outputs[None].element_type
        for node in _leaves(p)
        if "Combine per fingerprint, bucket by top bits/" in node.full_label
    ]
    assert [beam.coders.registry.get_coder(t) for t in bucketed] == [
        beam.coders.TupleCoder([beam.coders.VarIntCoder(), CandidateBlockCoder()])
    ]


def _leaves(p: beam.Pipeline) -> list:
    found = []

    class _Visitor(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node):
            found.append(node)

    p.visit(_Visitor())
    return found


def _batch_pages(n: int) -> list:
    from beamcrawl.schemas.records import FetchResult, Link, ParsedPage

    pages = []
    for i in range(n):
        entry = FrontierEntry(url=f"http://h{i % 7}.test/p{i}", fp=i, host=f"h{i % 7}.test", due_ms=0)
        page = ParsedPage(fetch=FetchResult(entry=entry, outcome="fetched", url=entry.url, status=200))
        page.links = [Link(url=f"http://h{j}.test/{'x' * (i % 40)}", fp=j) for j in range(i % 15)]
        page.title = "t" * (i % 90)
        pages.append(page)
    return pages


def test_page_batches_and_batched_lists_round_trip_and_estimate_their_size_from_a_few_items():
    """A batch's coder encodes it whole (its pages as one Packed pickle) and estimates its
    size from a few items, within a small factor of the encoded size."""
    from beamcrawl.schemas.coders import BatchCoder
    from beamcrawl.schemas.records import Batched, PageBatch

    pages = _batch_pages(500)
    batch = PageBatch(pages)
    coder = beam.coders.registry.get_coder(PageBatch)
    assert coder == BatchCoder(PageBatch)
    encoded = coder.encode(batch)
    back = coder.decode(encoded)
    assert type(back) is PageBatch and back.pages == pages
    assert len(encoded) <= _fallback_size(batch)  # the pages' classes written once
    assert 0.6 < coder.estimate_size(batch) / len(encoded) < 1.6
    rows = Batched({"url": p.fetch.url, "links": len(p.links)} for p in pages)
    listed = beam.coders.registry.get_coder(Batched)
    assert type(listed.decode(listed.encode(rows))) is Batched and listed.decode(listed.encode(rows)) == rows
    assert 0.6 < listed.estimate_size(rows) / len(listed.encode(rows)) < 1.6
    assert listed.estimate_size(Batched()) < 32


def test_the_stages_after_content_seen_declare_batches():
    from beamcrawl.schemas.coders import BatchCoder
    from beamcrawl.schemas.candidate_block import CandidateBlockCoder
    from beamcrawl.schemas.records import PageBatch
    from beamcrawl.transforms.freshness import ScheduleRevisits
    from beamcrawl.transforms.url_seen import ExtractCandidates
    from beamcrawl.core.policy.change_rate import SchedulePolicy

    p = beam.Pipeline(runner="FnApiRunner")
    batches = p | beam.Create([PageBatch(_batch_pages(3))])
    scheduled = batches | ScheduleRevisits(SchedulePolicy())
    offered = scheduled | ExtractCandidates()
    assert beam.coders.registry.get_coder(scheduled.element_type) == BatchCoder(PageBatch)
    # The offers are one block of columns a batch, under its own coder.
    assert isinstance(beam.coders.registry.get_coder(offered.element_type), CandidateBlockCoder)
