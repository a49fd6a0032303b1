"""Smoke test of ``bench/parse_in_round.py``: a small round whose parses are timed and whose
collections are counted, the pages alone and beside a thread, and the clock's accounting on
calls made here. About 30 seconds."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import parse_in_round  # noqa: E402
from stage_costs import sample_results  # noqa: E402

from beamcrawl.transforms import parse as parse_module  # noqa: E402


def test_a_small_round_prints_its_parses_and_the_pairs():
    proc = subprocess.run(
        [sys.executable, str(BENCH / "parse_in_round.py"), "--hosts", "30", "--window", "3", "--warmup-window", "2",
         "--pages", "60", "--pairs", "2"],
        capture_output=True, text=True, timeout=300, cwd=BENCH.parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = proc.stdout.splitlines()[0]
    parses = int(first.split("in the round: ")[1].split(" parses")[0].replace(",", ""))
    assert parses > 0, first
    gc_rows = [line for line in proc.stdout.splitlines() if line.startswith("| generation")]
    assert len(gc_rows) == 6, proc.stdout
    pair_rows = [
        line.split(" | ") for line in proc.stdout.splitlines() if line.startswith(("| alone", "| beside", "| the same"))
    ]
    assert [len(row[1].split()) for row in pair_rows] == [2, 2, 2], proc.stdout
    assert all(float(v) > 0 for row in pair_rows for v in row[1].split()), proc.stdout
    assert pair_rows[0][3].rstrip(" |").split() == ["1.00x", "1.00x"], proc.stdout


def test_mp_and_bad_numbers_are_refused_in_one_line():
    for args in (["--mp"], ["--pairs", "0", "--no-round"], ["--sleep-us", "0", "--no-round"]):
        proc = subprocess.run(
            [sys.executable, str(BENCH / "parse_in_round.py"), *args], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("parse_in_round.py: error:"), (
            args,
            proc.stderr,
        )


def test_the_clock_counts_each_parse_and_the_collections_inside_it():
    results = sample_results(5, 5)
    original = parse_module.parse_fetch
    with parse_in_round.ParseClock() as clock:
        assert parse_module.parse_fetch is not original
        for result in results:
            parse_module.parse_fetch(result, "beamcrawl")
        outside = clock.gc.get((False, 1), [0, 0.0])[0]
        gc.collect(1)  # outside a parse
        clock._local.parsing = True  # as the wrapper marks a parse under way
        gc.collect(0)
        clock._local.parsing = False
    assert parse_module.parse_fetch is original  # put back
    assert clock.calls == 5 and clock.cpu > 0 and clock.wall >= clock.cpu * 0.5
    assert clock.gc[(False, 1)][0] == outside + 1
    assert clock.gc[(True, 0)][0] >= 1
    assert parse_in_round._parse_all(results) > 0


def test_the_other_thread_runs_while_the_pages_are_parsed():
    results = sample_results(5, 20)
    before = sys.getswitchinterval()
    assert parse_in_round.beside_a_thread(results, 50, 100, 20.0) > 0
    assert sys.getswitchinterval() == before  # the switch interval put back
