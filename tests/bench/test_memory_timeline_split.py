"""bench/memory_timeline.py's RSS by process: with ``--mp`` the sum is split into this process
and each child (the SDK workers), the server's tree left out, and the table cell names them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import memory_timeline  # noqa: E402

MB = 1024 * 1024

# A child that holds 80 MB of touched memory until its stdin closes.
_HOLDER = "import sys; b = bytearray(80 * 1024 * 1024); print('ready', flush=True); sys.stdin.read()"


def _holder() -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    return child


def _release(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=30)


def test_rss_by_process_splits_this_process_and_its_children() -> None:
    children = [_holder(), _holder()]
    try:
        split = memory_timeline._Sampler(0.1, True, None, 0.05).rss_by_process()
        alone = memory_timeline._Sampler(0.1, False, None, 0.05).rss_by_process()
        # The server's tree is never counted: name one holder as the server.
        without = memory_timeline._Sampler(0.1, True, children[0].pid, 0.05).rss_by_process()
    finally:
        for child in children:
            _release(child)
    assert len(alone) == 1
    assert len(split) >= 3 and abs(split[0] - alone[0]) < 32 * MB
    assert split[1] >= 80 * MB and split[2] >= 80 * MB
    assert split[1:] == sorted(split[1:], reverse=True)
    assert len(without) == len(split) - 1 and sum(without) < sum(split) - 70 * MB


def test_peak_keeps_each_process_at_the_highest_sample() -> None:
    sampler = memory_timeline._Sampler(0.1, True, None, 0.05)
    sampler.sample()
    before = list(sampler.peak_split)
    child = _holder()
    try:
        time.sleep(0.05)
        sampler.sample()
    finally:
        _release(child)
    sampler.sample()  # lower again: the peak stays the one with the child
    assert sum(sampler.peak_split) == sampler.peak_split_rss
    assert len(sampler.peak_split) == len(before) + 1 and sampler.peak_split[1] >= 80 * MB


def test_split_cell_names_the_runner_and_its_children() -> None:
    assert memory_timeline._split_cell([300 * MB]) == ""
    cell = memory_timeline._split_cell([300 * MB, 560 * MB, 428 * MB, 2 * MB])
    assert cell == " (runner 300, children 560 + 428 + 2)"
