"""Smoke test of ``bench/table_buckets.py``: on a small bundle both forms of content seen's
table-bucket elements key to the same items (the bench checks it and exits otherwise), a
block costs 16 bytes an item plus its element's framing, and the table prints. Under a second."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import table_buckets  # noqa: E402


def test_both_forms_key_alike_and_blocks_are_sixteen_bytes_an_item(capsys):
    figures = table_buckets.measure(pages=300, bits=2, repeat=1)
    blocks, pairs = figures["blocks"], figures["pairs"]
    assert blocks["elements"] == pairs["elements"] == 20 * 4  # every bucket of every table is hit
    # 20 items of 16 bytes a page, and each element's framing (key, pickle opcodes) shared by
    # 300 / 4 pages of a bucket.
    assert 320 <= blocks["bytes"] < 320 + 80 * 40 / 300
    assert pairs["bytes"] > blocks["bytes"]
    table_buckets.main(["--pages", "50", "--bits", "1", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "| blocks | 40 |" in out and "| pairs | 40 |" in out
