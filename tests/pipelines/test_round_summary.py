"""The console summary of a round says whether the frontier left was counted or estimated."""

from __future__ import annotations

from beamcrawl.pipelines.round_summary import summary

KEYS = (
    "robots_fetches bytes deferred deferred_by_budgets fetch_errors hosts_planned links_found "
    "links_refused_by_shape new_urls pages_per_second pipeline_seconds responses robots_disallowed "
    "round urls_assigned urls_due"
).split()


def _report(**kw) -> dict:
    report = {k: 1 for k in KEYS} | {"metrics": {}, "files": {}, "purposes": []}
    return report | kw


def test_a_counted_frontier_is_given_as_counted_and_an_estimate_as_about():
    assert "frontier now 2500000" in summary(_report(frontier_size=2_500_000, frontier_size_exact=True))
    assert "frontier now about 2500000" in summary(_report(frontier_size=2_500_000, frontier_size_exact=False))
    # A report written before the field existed was always counted.
    assert "frontier now 7\n" in summary(_report(frontier_size=7))


def test_a_kind_whose_small_files_were_merged_says_how_many_were_staged():
    files = {"warc": ["warc/round=1/a.warc.gz"], "pages": ["pages/round=1/a.parquet", "pages/round=1/b.parquet"]}
    compacted = {"warc": {"before": 9, "after": 1}, "pages": {"before": 2, "after": 2}}
    text = summary(_report(frontier_size=1, files=files, compacted=compacted))
    assert "  warc: 1 file(s) (merged from 9 staged)\n" in text + "\n"
    assert "  pages: 2 file(s)\n" in text + "\n"  # none merged: said as before
    assert "  warc: 1 file(s)\n" in summary(_report(frontier_size=1, files=files)) + "\n"  # an older report


def test_urls_refused_by_a_robots_check_past_its_bound_are_said_only_when_there_are_some():
    assert "robots-disallowed 9 (4 of them by a robots.txt too costly to check" in summary(
        _report(frontier_size=1, robots_disallowed=9, robots_capped=4)
    )
    assert "robots-disallowed 1\n" in summary(_report(frontier_size=1, robots_capped=0))
    assert "robots-disallowed 1\n" in summary(_report(frontier_size=1))  # an older report
