"""The fetch stage's plumbing: what leaves it for the rest of the round (the fetching itself
is tested in tests/core/test_fetcher.py and end to end)."""

from __future__ import annotations

from beamcrawl.schemas.records import FetchResult, FrontierEntry
from beamcrawl.transforms.fetch import needs_processing


def _result(i: int, outcome: str) -> FetchResult:
    url = f"http://h{i % 5}.test/p{i}"
    entry = FrontierEntry(url=url, fp=i + 1, host=f"h{i % 5}.test", due_ms=0)
    return FetchResult(
        entry=entry,
        outcome=outcome,
        url=url,
        status=200 if outcome == "fetched" else 0,
        body=b"<html>%d</html>" % i,
        raw_body=b"<html>%d</html>" % i,
    )


OUTCOMES = ("fetched", "error", "robots_disallowed", "deferred")


def test_only_deferred_results_are_left_out():
    assert [needs_processing(_result(0, o)) for o in OUTCOMES] == [True, True, True, False]
