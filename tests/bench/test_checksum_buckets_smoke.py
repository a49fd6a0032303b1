"""Smoke test of ``bench/checksum_buckets.py``: on a small bundle both forms of content seen's
checksum-bucket elements group to the same probes (the bench checks it and exits otherwise),
a block is smaller than the pickled list, and the table prints. A few seconds."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import checksum_buckets  # noqa: E402


def test_both_forms_group_alike_and_a_block_is_smaller(capsys):
    figures = checksum_buckets.measure(pages=400, hosts=20, bits=2, repeat=1)
    block, packed = figures["block"], figures["packed"]
    assert block["elements"] == packed["elements"] == 4  # every bucket is hit
    # The digest as 20 bytes, not 37 characters, and a host's scheme and authority once.
    assert block["bytes"] < packed["bytes"] - 30
    checksum_buckets.main(["--pages", "50", "--hosts", "5", "--bits", "1", "--repeat", "1"])
    out = capsys.readouterr().out
    assert "| block | 2 |" in out and "| packed | 2 |" in out
