"""A round's small staged files merged before its commit: no record, line or row lost, every
index line (and page event's blob) pointing at its record, each merged WARC file valid."""

from __future__ import annotations

import json
import os
import sys
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.archive import compact
from beamcrawl.core.archive.compact import compact_parquet, compact_round, compact_warc, pack_groups
from beamcrawl.core.runtime.outputs import RoundOutputs, part_name

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import scheme_disk  # noqa: E402,F401  (tests/scheme_disk.py: registers its scheme)
from staged_warcs import check_warc_folder as _check_warc_folder  # noqa: E402  (tests/staged_warcs.py)
from staged_warcs import staged_warc as _warc_file  # noqa: E402

_BODY = st.one_of(st.binary(max_size=3000), st.integers(0, 200_000).map(lambda n: b"\0" * n))
_FILE = st.lists(_BODY, max_size=5)  # the bodies of a file's responses


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(_FILE, min_size=1, max_size=7), target_cut=st.floats(0.0, 1.2), small_cut=st.floats(0.0, 1.1))
def test_small_warc_files_are_merged_with_every_record_and_line(tmp_path_factory, bodies, target_cut, small_cut):
    outputs = RoundOutputs(str(tmp_path_factory.mktemp("out")), 3)
    serial = [0]
    urls = [u for b in bodies for u in _warc_file(outputs, b, serial)]
    # In the order the compaction takes them (by name), as it packs them: in that order.
    sizes = [
        os.path.getsize(os.path.join(outputs.staged("warc"), n)) for n in sorted(os.listdir(outputs.staged("warc")))
    ]
    target = max(1, int(sum(sizes) * target_cut))
    small = max(1, int(target * small_cut))
    before = _check_warc_folder(outputs)
    warc, index, moves = compact_warc(outputs, target, small=small)
    after = _check_warc_folder(outputs)
    assert sorted(after) == sorted(before) == sorted(urls)  # nothing lost, nothing twice
    left = os.listdir(outputs.staged("warc"))
    assert warc.before == len(bodies) and warc.after == len(left) == index.after
    merged = {new for new, _ in moves.values()}
    for rel in merged:
        assert os.path.getsize(os.path.join(outputs.staged("warc"), rel.rsplit("/", 1)[-1])) <= target + 200
    # Small files are packed in their order, so two of them that fit side by side (the files
    # between them too large to be merged) make at least one merge.
    eligible = [s for s in sizes if s < small and s <= target]
    if any(a + b <= target for a, b in zip(eligible, eligible[1:])):
        assert warc.after < warc.before


def test_a_warc_file_that_does_not_read_is_left_as_it_is(tmp_path):
    outputs = RoundOutputs(str(tmp_path), 1)
    serial = [0]
    for _ in range(3):
        _warc_file(outputs, [b"x" * 100, b"y"], serial)
    names = sorted(os.listdir(outputs.staged("warc")))
    bad = os.path.join(outputs.staged("warc"), names[0])
    data = open(bad, "rb").read()
    with open(bad, "wb") as fh:
        fh.write(data[:-5])  # its last member cut short
    warc, index, moves = compact_warc(outputs, 1 << 20)
    assert open(bad, "rb").read() == data[:-5]
    assert warc.before == 3 and warc.after == 2 and index.after == 2
    assert f"{outputs.final_rel('warc')}/{names[0]}" not in moves
    assert os.path.exists(os.path.join(outputs.staged("cdxj"), names[0][: -len(".warc.gz")] + ".cdxj"))


def test_a_warc_file_whose_index_points_elsewhere_is_left_as_it_is(tmp_path):
    outputs = RoundOutputs(str(tmp_path), 1)
    serial = [0]
    for _ in range(2):
        _warc_file(outputs, [b"x" * 100], serial)
    index = os.path.join(outputs.staged("cdxj"), sorted(os.listdir(outputs.staged("cdxj")))[0])
    text = open(index, "rb").read().replace(b'"offset": "', b'"offset": "1')
    with open(index, "wb") as fh:
        fh.write(text)
    warc, _, moves = compact_warc(outputs, 1 << 20)
    assert warc.after == 2 and not moves


_ROWS = st.lists(st.tuples(st.text(max_size=30), st.integers(-(2**40), 2**40)), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_ROWS, min_size=1, max_size=8), odd=st.sets(st.integers(0, 7)), target=st.integers(500, 20_000))
def test_small_parquet_parts_keep_their_rows_in_order(tmp_path_factory, parts, odd, target):
    folder = str(tmp_path_factory.mktemp("pages"))
    plain = pa.schema([("url", pa.string()), ("n", pa.int64())])
    other = pa.schema([("url", pa.string()), ("n", pa.int32())])
    written = []
    for i, rows in enumerate(parts):
        schema = other if i in odd else plain
        table = pa.table(
            {"url": [u for u, _ in rows], "n": [n % 2**31 if i in odd else n for _, n in rows]}, schema=schema
        )
        name = os.path.join(folder, f"part-{i:04d}.parquet")
        pq.write_table(table, name)
        written.append((schema, table))
    with open(os.path.join(folder, "part-9999.parquet"), "wb") as fh:
        fh.write(b"PAR1 not parquet")  # does not read: left as it is
    done = compact_parquet(folder, target, small=target)
    left = sorted(os.listdir(folder))
    assert "part-9999.parquet" in left
    assert done.before == len(parts) + 1 and done.after == len(left)
    for schema in (plain, other):
        expected = [row for s, t in written if s.equals(schema) for row in t.to_pylist()]
        got = []
        for name in left:
            if name == "part-9999.parquet":
                continue
            table = pq.read_table(os.path.join(folder, name))
            assert table.schema.equals(plain) or table.schema.equals(other)  # never mixed
            if table.schema.equals(schema):
                got.append(table.to_pylist())
        # each merged file holds its sources' rows in order; every row is somewhere once
        assert sorted(r for rows in got for r in map(lambda d: (d["url"], d["n"]), rows)) == sorted(
            (d["url"], d["n"]) for d in expected
        )
        # each file holds whole source parts, in their order (with the rows' multiset above, no
        # source is in two files); sources with the same rows are told apart by their place only
        sources = [t.to_pylist() for s, t in written if s.equals(schema)]
        for rows in got:
            assert _whole_sources_in_order(rows, sources), rows


def _whole_sources_in_order(rows: list, sources: list[list]) -> bool:
    """Whether ``rows`` are some of ``sources``, whole and in their order, one after another."""

    def fits(at: int, start: int) -> bool:
        if at == len(rows):
            return True
        return any(
            src and rows[at : at + len(src)] == src and fits(at + len(src), j + 1)
            for j, src in enumerate(sources[start:], start)
        )

    return fits(0, 0)


@given(
    items=st.lists(st.tuples(st.integers(0, 100), st.integers(0, 5)), max_size=30),
    target=st.integers(1, 300),
    small=st.integers(1, 300),
    max_count=st.one_of(st.none(), st.integers(1, 10)),
)
def test_groups_are_small_files_in_order_within_the_target(items, target, small, max_count):
    named = [(f"f{i:02d}", size, count) for i, (size, count) in enumerate(items)]
    groups = pack_groups(named, target, small, max_count)
    sizes = {n: (s, c) for n, s, c in named}
    seen = [n for g in groups for n in g]
    assert seen == sorted(seen) and len(seen) == len(set(seen))  # in order, each once
    for group in groups:
        assert len(group) >= 2
        assert sum(sizes[n][0] for n in group) <= target
        assert all(sizes[n][0] < small for n in group)
        if max_count is not None:
            assert sum(sizes[n][1] for n in group) <= max_count


def test_page_events_point_at_their_records_after_a_merge(tmp_path):
    outputs = RoundOutputs(str(tmp_path), 2)
    serial = [0]
    for _ in range(4):
        _warc_file(outputs, [b"a" * 50, b"b" * 70], serial)
    rows = []
    for name in sorted(os.listdir(outputs.staged("cdxj"))):
        for line in open(os.path.join(outputs.staged("cdxj"), name), "rb").read().splitlines():
            fields = json.loads(line.split(b" ", 2)[2])
            rows.append({"url": fields["url"], "blob": f"{fields['filename']}@{fields['offset']}"})
    rows.append({"url": "http://near.test/", "blob": None})
    schema = pa.schema([("url", pa.string()), ("blob", pa.string())])
    os.makedirs(outputs.staged("pages"))
    # one part per page (small, merged) and one large part holding them all (not merged)
    for row in rows:
        pq.write_table(
            pa.Table.from_pylist([row], schema=schema), os.path.join(outputs.staged("pages"), part_name(".parquet"))
        )
    filler = [{"url": f"http://filler.test/{i}", "blob": None} for i in range(20_000)]
    pq.write_table(
        pa.Table.from_pylist(rows + filler, schema=schema), os.path.join(outputs.staged("pages"), "part-big.parquet")
    )
    big = os.path.getsize(os.path.join(outputs.staged("pages"), "part-big.parquet"))
    report = compact_round(outputs, 1 << 20, big + 1, max_index=None)
    assert report["warc"].after == 1 and report["pages"].after == 2
    for name in os.listdir(outputs.staged("pages")):
        for row in pq.read_table(os.path.join(outputs.staged("pages"), name)).to_pylist():
            if row["blob"] is None:
                continue
            rel, offset = row["blob"].rsplit("@", 1)
            with open(os.path.join(outputs.staged("warc"), rel.rsplit("/", 1)[-1]), "rb") as fh:
                fh.seek(int(offset))
                record = next(iter(ArchiveIterator(fh)))
            assert record.rec_headers.get_header("WARC-Target-URI") == row["url"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    bodies=st.lists(_BODY, min_size=1, max_size=6),
    block=st.integers(1, 300),
    chunk=st.integers(1, 70_000),
    cut=st.integers(1, 40),
)
def test_members_are_found_whatever_the_blocks_and_a_cut_file_is_not_whole(
    tmp_path_factory, monkeypatch, bodies, block, chunk, cut
):
    monkeypatch.setattr(compact, "_READ_BLOCK", block)
    monkeypatch.setattr(compact, "_INFLATE_CHUNK", chunk)
    members = []
    for body in bodies:
        packer = zlib.compressobj(6, zlib.DEFLATED, 31)
        members.append(packer.compress(body) + packer.flush())
    data = b"".join(members)
    path = str(tmp_path_factory.mktemp("gz") / "f.gz")
    with open(path, "wb") as fh:
        fh.write(data)
    starts, size, first = compact._members(path)
    assert starts == [sum(map(len, members[:i])) for i in range(len(members))] and size == len(data)
    assert first == bodies[0][:65536] or (len(first) >= 65536 and bodies[0].startswith(first))
    kept = len(data) - min(cut, len(data))
    if kept in starts:  # cut at a member's end: whole members still (the empty file: none)
        return
    with open(path, "wb") as fh:
        fh.write(data[:kept])
    with pytest.raises((ValueError, zlib.error)):
        compact._members(path)


def test_warc_files_stay_as_they_are_when_a_pages_part_does_not_read(tmp_path):
    outputs = RoundOutputs(str(tmp_path), 2)
    serial = [0]
    for _ in range(3):
        _warc_file(outputs, [b"a" * 50], serial)
    os.makedirs(outputs.staged("pages"))
    with open(os.path.join(outputs.staged("pages"), "part-bad.parquet"), "wb") as fh:
        fh.write(b"PAR1 cut short")  # its pages' blobs could not be followed
    report = compact_round(outputs, 1 << 20, 1 << 20)
    assert report["warc"].before == report["warc"].after == 3
    assert len(os.listdir(outputs.staged("warc"))) == 3 and report["pages"].after == 1


def test_a_round_on_a_remote_filesystem_is_compacted_and_committed_as_on_local_disk(tmp_path):
    """Every file operation through Beam's FileSystems (as on gs://): sizes, reads, the
    merged file's write, the sources' deletion, then the commit's moves."""
    local = RoundOutputs(str(tmp_path), 4)
    serial = [0]
    urls = [u for _ in range(4) for u in _warc_file(local, [b"a" * 60, b"b" * 90], serial)]
    os.makedirs(local.staged("links"))
    for i in range(3):
        pq.write_table(
            pa.table({"src": [f"s{i}"], "dst": [f"d{i}"]}), os.path.join(local.staged("links"), f"part-{i}.parquet")
        )
    remote = RoundOutputs(f"{scheme_disk.SCHEME}://{tmp_path}", 4)
    report = compact_round(remote, 1 << 20, 1 << 20)
    assert (report["warc"].before, report["warc"].after) == (4, 1) and (
        report["links"].before,
        report["links"].after,
    ) == (3, 1)
    assert sorted(_check_warc_folder(local)) == sorted(urls)
    moved = remote.commit_files()
    assert len(moved["warc"]) == len(moved["cdxj"]) == len(moved["links"]) == 1
    folder = os.path.join(str(tmp_path), "warc", "round=4")
    assert sorted(_check_warc_folder(local, folder, folder)) == sorted(urls)
    links = pq.read_table(
        os.path.join(str(tmp_path), "links", "round=4", os.listdir(os.path.join(str(tmp_path), "links", "round=4"))[0])
    )
    assert links.to_pylist() == [{"src": f"s{i}", "dst": f"d{i}"} for i in range(3)]


def test_a_lone_small_warc_file_is_not_read(tmp_path, monkeypatch):
    """A round in process stages one file of a kind: nothing to merge it with, so the
    compaction does not inflate it to check it."""
    outputs = RoundOutputs(str(tmp_path), 1)
    _warc_file(outputs, [b"a" * 50], [0])
    reads = []
    monkeypatch.setattr(compact, "_read_source", lambda *a: reads.append(a))
    warc, _, _ = compact_warc(outputs, 1 << 20)
    assert reads == [] and warc.before == warc.after == 1
