"""Smoke test of bench/writer_memory.py: on a small buffer it fills, flushes and measures, and
the part it writes reads back whole and sorted; index entries weigh less packed, an index
sorted in runs holds less than a list of them, and a bucket's cells cut in chunks hold less
than cut at once."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import writer_memory  # noqa: E402

from beamcrawl.core.archive import cdxj  # noqa: E402
from beamcrawl.transforms import parquet_io  # noqa: E402


def test_flush_bench_measures_a_part_that_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parquet_io, "FLUSH_BYTES", 200_000)
    monkeypatch.setattr(parquet_io, "SEAL_ROWS", 100)
    out = tmp_path / "part.parquet"
    figures = writer_memory.flush_once(str(out))
    assert figures["rows"] % writer_memory.LINKS_A_PAGE == 0 and figures["rows"] > 100
    assert figures["held_mb"] > 0 and figures["cpu_s"] > 0
    table = pq.read_table(out)
    assert table.num_rows == figures["rows"]
    keys = list(zip(table.column("src").to_pylist(), table.column("dst").to_pylist()))
    assert keys == sorted(keys)


def test_packed_index_entries_weigh_less_than_entries() -> None:
    entry, packed = writer_memory.index_bytes(500)
    assert 0 < packed < entry


def test_an_index_in_runs_holds_less_than_a_list_and_writes_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cdxj, "RUN_ENTRIES", 200)
    rows = {row["how"]: row for row in writer_memory.index_runs(3_000, str(tmp_path))}
    assert set(rows) == {"list, joined", "list", "runs"}  # and the bench checked the files are the same
    assert 0 < rows["runs"]["peak_mb"] < rows["list"]["peak_mb"] / 2
    assert rows["list"]["peak_mb"] < rows["list, joined"]["peak_mb"]
    assert all(row["cpu_us"] > 0 for row in rows.values())


def test_a_buckets_cells_cut_in_chunks_hold_less_and_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    from beamcrawl.schemas import cell_columns

    monkeypatch.setattr(cell_columns, "CUT_ROWS", 100)
    rows = {row["how"]: row for row in writer_memory.bucket_cells(2_000)}  # the bench checks the cells equal
    assert 0 < rows["100 rows a gather"]["peak_mb"] < rows["one gather"]["peak_mb"]
    assert all(row["cpu_us"] > 0 for row in rows.values())
