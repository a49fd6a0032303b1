"""Smoke test of bench/parquet_flush.py on a small buffer: it fills, flushes and measures, and
the part it writes reads back whole and sorted."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import parquet_flush  # noqa: E402

from beamcrawl.transforms import parquet_io  # noqa: E402


def test_flush_bench_measures_a_part_that_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parquet_io, "FLUSH_BYTES", 200_000)
    monkeypatch.setattr(parquet_io, "SEAL_ROWS", 100)
    out = tmp_path / "part.parquet"
    figures = parquet_flush.flush_once(str(out))
    assert figures["rows"] % parquet_flush.LINKS_A_PAGE == 0 and figures["rows"] > 100
    assert figures["held_mb"] > 0 and figures["cpu_s"] > 0
    table = pq.read_table(out)
    assert table.num_rows == figures["rows"]
    keys = list(zip(table.column("src").to_pylist(), table.column("dst").to_pylist()))
    assert keys == sorted(keys)
