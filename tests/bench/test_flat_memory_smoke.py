"""Smoke test of ``bench/flat_memory.py``: a tiny web warmed once, then a short and a longer round,
each in a process of its own from the same restored store. About 30 seconds."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from flat_memory import flat, parse_windows, restore  # noqa: E402


def test_each_round_runs_alone_from_the_same_warmed_store():
    proc = subprocess.run(
        [
            sys.executable, str(BENCH / "flat_memory.py"), "--hosts", "30", "--warmup-window", "2",
            "--warmup-rounds", "1", "--windows", "2,4", "--top", "3",
        ],
        capture_output=True, text=True, timeout=600, cwd=BENCH.parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert out.count("in its own process") == 2, out
    rows = [
        line.split("|")[1:-1]
        for line in out.splitlines()
        if line.startswith("| ") and line.split("|")[1].strip().isdigit()
    ]
    rows = [r for r in rows if len(r) == 8]  # the summary's rows, not the stages'
    assert [float(r[1]) for r in rows] == [2.0, 4.0], out
    pages = [int(r[2].replace(",", "")) for r in rows]
    assert all(n > 0 for n in pages), out
    # both rounds began from the restored store: the same URLs were due (but those that fell
    # due meanwhile; without the restore the second would find the first's new links), and the
    # longer window fetched more of them
    due = [int(r[3].replace(",", "")) for r in rows]
    assert due[0] > 0 and abs(due[1] - due[0]) <= due[0] // 50, out
    assert pages[1] > pages[0], out
    # a fresh process's start: only imports, Beam and the store
    starts = [float(r[5].replace(",", "")) for r in rows]
    peaks = [float(r[6].replace(",", "")) for r in rows]
    assert all(0 < s <= p for s, p in zip(starts, peaks)), out
    ratio = float(out.split("flat: ")[1].split("= ")[1].rstrip("x\n"))
    assert ratio == pytest.approx(peaks[1] / peaks[0], abs=0.01), out


def test_windows_are_parsed_shortest_first_and_checked():
    assert parse_windows("180,60") == [60.0, 180.0]
    for bad in ("60", "60,x", "0,60", "-5,60"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_windows(bad)


def test_flat_is_the_longest_windows_mean_peak_over_the_shortests():
    rounds = [
        {"window": 60.0, "peak_mb": 600.0},
        {"window": 180.0, "peak_mb": 690.0},
        {"window": 60.0, "peak_mb": 640.0},
        {"window": 180.0, "peak_mb": 700.0},
    ]
    assert flat(rounds) == pytest.approx(695.0 / 620.0)


def test_restore_replaces_the_folder_with_its_copy(tmp_path):
    snapshot, out = tmp_path / "warmed", tmp_path / "out"
    (snapshot / "warc").mkdir(parents=True)
    (snapshot / "store.sqlite").write_bytes(b"state at the warm-up's end")
    (snapshot / "warc" / "a.warc.gz").write_bytes(b"x")
    out.mkdir()
    (out / "store.sqlite").write_bytes(b"state after a measured round")
    (out / "warc").mkdir()
    (out / "warc" / "b.warc.gz").write_bytes(b"written by the round")
    restore(snapshot, out)
    assert (out / "store.sqlite").read_bytes() == b"state at the warm-up's end"
    assert sorted(p.name for p in (out / "warc").iterdir()) == ["a.warc.gz"]
    assert (snapshot / "store.sqlite").exists()  # the copy stays for the next round
