"""Smoke test of ``bench/table_buckets.py``: on a small bundle the three forms of content
seen's table-bucket elements key every table's items alike (the bench checks it and exits
otherwise), a block costs 16 bytes an item plus its element's framing, a block a group of
tables carries a fifth of a block a table, and the table prints. Under a second."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import table_buckets  # noqa: E402


def test_the_forms_key_alike_and_blocks_are_sixteen_bytes_an_item(capsys):
    figures = table_buckets.measure(pages=300, bits=2, repeat=1)
    tables, groups, pairs = figures["table blocks"], figures["group blocks"], figures["pairs"]
    assert tables["elements"] == pairs["elements"] == 20 * 4  # every bucket of every table is hit
    assert groups["elements"] == 4 * 4  # every bucket of each of the four groups
    # 20 (or 4) items of 16 bytes a page, and each element's framing (key, pickle opcodes)
    # shared by the pages of a bucket.
    assert 320 <= tables["bytes"] < 320 + 80 * 40 / 300
    assert 64 <= groups["bytes"] < 64 + 16 * 40 / 300
    assert pairs["bytes"] > tables["bytes"]
    table_buckets.main(["--pages", "50", "--bits", "1", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "| table blocks | 40 |" in out and "| pairs | 40 |" in out and "| group blocks | 8 |" in out
