"""Smoke test of ``bench/offers.py``: on a few simweb pages both forms give the same buckets
(the bench checks it and returns 1 otherwise) and both figures print. A few seconds."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import offers  # noqa: E402
from link_hosts import parsed  # noqa: E402
from per_page_costs import simweb_pages  # noqa: E402

from beamcrawl.schemas.candidate_block import CandidateBlock  # noqa: E402
from beamcrawl.schemas.records import PageBatch  # noqa: E402


def test_both_forms_give_the_same_buckets_and_print(capsys):
    batches = [PageBatch(parsed(simweb_pages(3, 40)))]
    n, by_round = offers.run(batches, True)
    m, by_candidates = offers.run(batches, False)
    assert n == m > 40 and by_round
    assert all(isinstance(block, CandidateBlock) and block.columnar for _, block in by_round)
    assert [(b, k.to_candidates()) for b, k in by_round] == [(b, k.to_candidates()) for b, k in by_candidates]
    assert offers.main(["--hosts", "3", "--pages", "40", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "  round " in out and "  candidates " in out and "µs an offer" in out
