"""Smoke test of ``bench/store_growth.py``: tiny stores filled and written to, every figure
printed, and the counters it reads measure what this process did. A few seconds."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import store_growth  # noqa: E402

from beamcrawl.stores.embedded import EmbeddedStore  # noqa: E402


def test_every_figure_prints(capsys, tmp_path):
    assert store_growth.main(["--sizes", "1000,8000", "--runs", "3", "--run", "150", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = [
        [c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if re.match(r"\| [\d,]+ \|", line)
    ]
    assert [(row[0], row[1]) for row in rows] == [
        ("1,000", "sorted"), ("1,000", "spread"), ("8,000", "sorted"), ("8,000", "spread"),
    ]  # fmt: skip
    for cells in rows:
        assert len(cells) == 9, cells
        assert float(cells[3]) >= 0 and float(cells[4]) >= 0  # CPU a key (ticks: may round to 0 here)
        assert float(cells[5]) > 0  # wall a key
        assert float(cells[6]) > 0 and float(cells[7]) > 0 and float(cells[8]) > 0  # Linux's counters
    for order in ("sorted", "spread"):
        assert re.search(rf"{order}: CPU a key at 8,000 / at 1,000: \d+\.\d+×", out)
    assert not list(tmp_path.glob("store-*")), "the stores are removed at the end"


def test_the_orders_cut_runs_as_described():
    sorted_runs = store_growth.new_runs(4, 50, "sorted", seed=1)
    spread_runs = store_growth.new_runs(4, 50, "spread", seed=1)
    for runs in (sorted_runs, spread_runs):
        assert [len(r) for r in runs] == [50] * 4 and all(r == sorted(r) for r in runs)
    # sorted: the runs follow each other through the key space; spread: each spans most of it
    assert all(a[-1] <= b[0] for a, b in zip(sorted_runs, sorted_runs[1:]))
    assert all(r[-1] - r[0] > 1 << 62 for r in spread_runs)
    with pytest.raises(ValueError, match="unknown order"):
        store_growth.new_runs(1, 1, "shuffled", seed=1)


def test_the_url_state_goes_through_the_record_stage_writer_at_each_hold(capsys, tmp_path):
    argv = ["--sizes", "2000", "--runs", "1", "--run", "10", "--pages", "1500", "--hold-bytes", "0,200000"]
    assert store_growth.main([*argv, "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "The URL state of 1,500 fetched pages, in batches of 1,000" in out
    held = [
        [c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| 2,000 | ")
    ]
    assert [row[1] for row in held] == ["sorted", "spread", "0", "200,000"]
    for cells in held[2:]:
        assert len(cells) == 8 and float(cells[4]) > 0 and float(cells[6]) > 0


def test_url_state_written_through_the_writer_lands_whole(tmp_path):
    store_growth.fill(tmp_path / "s.sqlite", 3000)
    rows = store_growth.url_state_rows(3000, 2500, seed=5)
    assert len({key for key, _ in rows}) == 2500
    out = store_growth.write_url_state(tmp_path / "s.sqlite", rows, hold_bytes=1 << 20)
    assert out["keys"] == 2500 and out["writes"] > 0
    store = EmbeddedStore(str(tmp_path / "s.sqlite"))
    try:
        got = store.read_keys("urls", [key for key, _ in rows])
    finally:
        store.close()
    assert all(got[key][column] == value for key, cells in rows for column, value in cells.items())


def test_the_runs_land_in_the_seen_set(tmp_path):
    store = EmbeddedStore(str(tmp_path / "s.sqlite"))
    try:
        row = store_growth.write_runs(store, runs=2, run=50, seed=3, order="spread")
        keys = list(store.read_range("urls", keys_only=True))
    finally:
        store.close()
    assert row["keys"] == 100 and len(keys) == 100
    assert row["writes"] * row["keys"] >= 2  # a run's transaction writes its WAL frames
    assert row["written_kib"] > 0


def test_proc_io_counts_this_process_writes(tmp_path):
    before = store_growth.proc_io()
    (tmp_path / "f").write_bytes(b"x" * 100_000)
    after = store_growth.proc_io()
    assert after["wchar"] - before["wchar"] >= 100_000
    assert after["syscw"] > before["syscw"]
