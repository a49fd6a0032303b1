"""The fetch stage's plumbing: what leaves it for the rest of the round (the fetching itself
is tested in tests/core/test_fetcher.py and end to end)."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamcrawl.schemas.records import FetchResult, FrontierEntry
from beamcrawl.transforms.fetch import SpreadResults, needs_processing


def _result(i: int, outcome: str) -> FetchResult:
    url = f"http://h{i % 5}.test/p{i}"
    entry = FrontierEntry(url=url, fp=i + 1, host=f"h{i % 5}.test", due_ms=0)
    return FetchResult(entry=entry, outcome=outcome, url=url, status=200 if outcome == "fetched" else 0,
                       body=b"<html>%d</html>" % i, raw_body=b"<html>%d</html>" % i)


OUTCOMES = ("fetched", "error", "robots_disallowed", "deferred")


def test_only_deferred_results_are_left_out():
    assert [needs_processing(_result(0, o)) for o in OUTCOMES] == [True, True, True, False]


def test_spread_results_keeps_every_result_but_the_deferred_ones():
    results = [_result(i, OUTCOMES[i % 4]) for i in range(200)]
    with TestPipeline(runner="FnApiRunner") as p:
        out = (
            p
            | beam.Create(results)
            | SpreadResults()
            | beam.Map(lambda r: (r.url, r.outcome, r.body))
        )
        assert_that(out, equal_to([(r.url, r.outcome, r.body) for r in results if r.outcome != "deferred"]))
