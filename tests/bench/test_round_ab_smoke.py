"""Smoke test of ``bench/round_ab.py``: a tiny web warmed once, then a round of this checkout
and one of another tree (a copy of this one's package and bench), each in a process of its own
from the same restored store. About 30 seconds."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH))

from round_ab import parse_env, parse_order, table  # noqa: E402


def test_a_round_of_each_variant_from_the_same_warmed_store(tmp_path: Path) -> None:
    tree = tmp_path / "other"
    shutil.copytree(ROOT / "beamcrawl", tree / "beamcrawl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(BENCH, tree / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run(
        [
            sys.executable, str(BENCH / "round_ab.py"), "--tree", str(tree), "--order", "AB", "--hosts", "30",
            "--window", "2", "--warmup-window", "2", "--warmup-rounds", "1", "--top", "3",
        ],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    # B's round imported the other tree's package, A's this checkout's (the editable install)
    assert f"beamcrawl from {tree / 'beamcrawl' / '__init__.py'}" in out, out
    assert out.count("beamcrawl from") == 1, out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ")]
    rows = [r for r in rows if len(r) == 9 and r[1].strip() in ("A", "B")]  # the summary's rows
    assert [r[1].strip() for r in rows] == ["A", "B"], out
    pages = [int(r[2].replace(",", "")) for r in rows]
    due = [int(r[3].replace(",", "")) for r in rows]
    assert all(n > 0 for n in pages), out
    assert due[0] > 0 and abs(due[1] - due[0]) <= due[0] // 50, out  # both from the restored store
    assert all(float(r[8]) > 0 for r in rows), out  # the CPU of the round's own process


def test_with_mp_each_round_runs_on_two_workers_and_bs_workers_run_the_other_tree(tmp_path: Path) -> None:
    tree, marks = tmp_path / "other", tmp_path / "marks"
    marks.mkdir()
    shutil.copytree(ROOT / "beamcrawl", tree / "beamcrawl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(BENCH, tree / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tree / "beamcrawl" / "__init__.py", "a", encoding="utf-8") as init:
        # the copy's package says which SDK workers imported it: one file a worker process
        # (a process Beam started as a worker has its control endpoint in the environment;
        # its argv says nothing yet while `-m beamcrawl.pipelines.sdk_worker` imports the package)
        init.write(
            "\nimport os as _os\n"
            "if 'CONTROL_API_SERVICE_DESCRIPTOR' in _os.environ:\n"
            f"    open(_os.path.join({str(marks)!r}, str(_os.getpid())), 'w').close()\n"
        )
    proc = subprocess.run(
        [
            sys.executable, str(BENCH / "round_ab.py"), "--mp", "--tree", str(tree), "--order", "AB",
            "--hosts", "20", "--window", "2", "--warmup-window", "2", "--warmup-rounds", "1", "--top", "3",
        ],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines() if line.startswith("| ")]
    rows = [r for r in rows if len(r) == 9 and r[1].strip() in ("A", "B")]
    assert [r[1].strip() for r in rows] == ["A", "B"], proc.stdout
    for r in rows:
        # The peak's cell: the sum, then each process at that moment, "795 (257 + 268 + 267 + 2 + 2)".
        total, _, parts = r[6].strip().partition(" (")
        start, peak = int(r[5].replace(",", "")), int(total.replace(",", ""))
        by_process = [int(mb.replace(",", "")) for mb in parts.rstrip(")").split(" + ")]
        # the runner's process at the start, then two SDK workers beside it (each imports Beam)
        assert peak - start > 200, proc.stdout
        assert len(by_process) >= 3 and sorted(by_process)[-2] > 100, r[6]
        assert abs(sum(by_process) - peak) <= len(by_process), r[6]  # each rounded to the MB
    # B's two workers imported the other tree, as B's runner did; A's (and the warm-up's) this one
    assert len(list(marks.iterdir())) == 2, proc.stdout[-3000:]
    assert f"beamcrawl from {tree / 'beamcrawl' / '__init__.py'}" in proc.stdout


def test_the_order_and_the_variables_are_parsed_and_checked() -> None:
    assert parse_order("abba") == "ABBA"
    for bad in ("", "AAA", "ABC", "A B"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_order(bad)
    assert parse_env("X=1=2") == ("X", "1=2") and parse_env("Y=") == ("Y", "")
    for bad in ("X", "=1"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_env(bad)


def test_b_is_a_tree_or_variables_never_both_or_neither(tmp_path: Path) -> None:
    for extra in ([], ["--tree", str(ROOT), "--env", "X=1"], ["--tree", str(tmp_path)]):
        proc = subprocess.run(
            [sys.executable, str(BENCH / "round_ab.py"), *extra], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2 and "error:" in proc.stderr, (extra, proc.stderr)


def test_the_table_has_a_row_a_round_with_its_cpu_a_page() -> None:
    rounds = [
        {
            "variant": "A",
            "pages": 1000,
            "urls_due": 5000,
            "seconds": 70.0,
            "start_mb": 200,
            "peak_mb": 300,
            "cpu_s": 1.5,
        },
        {"variant": "B", "pages": 0, "urls_due": 5000, "seconds": 1.0, "start_mb": 200, "peak_mb": 200, "cpu_s": 0.0},
    ]
    lines = table(rounds).splitlines()
    assert lines[2].split("|")[1:-1] == [
        " 1 ",
        " A ",
        " 1,000 ",
        " 5,000 ",
        " 70.0 ",
        " 200 ",
        " 300 ",
        " 102.4 ",
        " 1.50 ",
    ]
    assert lines[3].split("|")[2].strip() == "B" and lines[3].split("|")[-2].strip() == "0.00"
    # With two workers the peak's cell names each process's share.
    rounds[0]["peak_by_process_mb"] = [90.4, 150.0, 59.6]
    rounds[1]["peak_by_process_mb"] = [200.0]
    lines = table(rounds).splitlines()
    assert lines[2].split("|")[7] == " 300 (90 + 150 + 60) " and lines[3].split("|")[7] == " 200 "
