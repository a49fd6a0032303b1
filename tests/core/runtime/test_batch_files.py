"""Batch files: records written to bounded files and read back by reference, in order."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.runtime.batch_files import BatchRef, BatchWriter, read_batch, read_spans, write_spans


def write_all(folder: str, records: list[bytes], max_records: int, max_bytes: int) -> list[BatchRef]:
    writer = BatchWriter(folder, max_records, max_bytes)
    refs = [ref for ref in map(writer.append, records) if ref is not None]
    last = writer.close()
    return refs + ([last] if last is not None else [])


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.binary(max_size=300), max_size=60),
    max_records=st.integers(1, 20),
    max_bytes=st.integers(1, 2_000),
)
def test_records_come_back_in_order_from_files_within_their_bounds(tmp_path_factory, records, max_records, max_bytes):
    folder = str(tmp_path_factory.mktemp("batches"))
    refs = write_all(folder, records, max_records, max_bytes)
    assert [r for ref in refs for r in read_batch(folder, ref)] == records
    assert sum(ref.records for ref in refs) == len(records)
    assert sorted(os.listdir(folder)) == sorted(ref.name for ref in refs)  # every file closed, named once
    for ref in refs:
        assert 1 <= ref.records <= max_records
        assert ref.length == os.path.getsize(os.path.join(folder, ref.name))
        # a file is closed by the record that reaches the byte budget: it exceeds it by at most that record
        assert ref.length < max_bytes + 4 + 300
    # only the last file may be below both bounds
    for ref in refs[:-1]:
        assert ref.records == max_records or ref.length >= max_bytes


def test_a_file_that_does_not_match_its_reference_fails(tmp_path):
    folder = str(tmp_path)
    (ref,) = write_all(folder, [b"one", b"two", b"three"], 10, 1_000)
    path = os.path.join(folder, ref.name)
    data = open(path, "rb").read()
    with open(path, "wb") as fh:
        fh.write(data[:-2])
    with pytest.raises(OSError, match="short"):
        list(read_batch(folder, ref))
    with open(path, "wb") as fh:
        fh.write(data + b"\x00")
    with pytest.raises(OSError, match="does not match"):
        list(read_batch(folder, ref))
    os.remove(path)
    with pytest.raises(OSError):
        list(read_batch(folder, ref))


def test_a_writer_with_no_records_leaves_no_file(tmp_path):
    assert write_all(str(tmp_path / "none"), [], 5, 100) == []
    assert not (tmp_path / "none").exists()
    with pytest.raises(ValueError):
        BatchWriter(str(tmp_path), 0, 100)


@settings(max_examples=60, deadline=None)
@given(
    files=st.lists(st.lists(st.binary(max_size=200), max_size=12), max_size=5),
    data=st.data(),
)
def test_any_spans_of_any_files_read_back_in_the_order_asked(tmp_path_factory, files, data):
    """Several span files (one per emission), and a reader asking for any subset of their
    records in any order (a shuffle's group): each comes back whole, in the order asked."""
    folder = str(tmp_path_factory.mktemp("spans"))
    written = [(ref, record) for records in files for ref, record in zip(write_spans(folder, records), records)]
    assert len(os.listdir(folder)) == sum(1 for records in files if records)  # no file for no records
    order = data.draw(st.permutations(written))
    asked = order[: data.draw(st.integers(0, len(order)))]
    assert list(read_spans(folder, [ref for ref, _ in asked])) == [record for _, record in asked]


def test_a_span_past_its_files_end_fails(tmp_path):
    folder = str(tmp_path)
    refs = write_spans(folder, [b"one", b"two", b"three"])
    path = os.path.join(folder, refs[0].name)
    with open(path, "rb+") as fh:
        fh.truncate(8)
    assert list(read_spans(folder, refs[:2])) == [b"one", b"two"]
    with pytest.raises(OSError, match="short"):
        list(read_spans(folder, refs))
    os.remove(path)
    with pytest.raises(OSError):
        list(read_spans(folder, refs[:1]))
