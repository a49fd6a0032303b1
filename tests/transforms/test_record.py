"""Record: the URL-state cells a fetch outcome writes, copies included."""

from __future__ import annotations

import json

from beamcrawl.core.urlnorm import fingerprint
from beamcrawl.schemas.records import FetchResult, FrontierEntry, ParsedPage, UrlState
from beamcrawl.transforms.record import DUPLICATE_CELL, url_state_cells


def _page(outcome: str = "fetched", source: str = "link", duplicate_of: str | None = None) -> ParsedPage:
    url = "http://b.test/story"
    entry = FrontierEntry(url=url, fp=fingerprint(url), host="b.test", due_ms=0, source=source)
    fetch = FetchResult(entry=entry, outcome=outcome, url=url, status=200 if outcome == "fetched" else 0,
                        fetched_at=12.5, error=None if outcome == "fetched" else "timeout")
    return ParsedPage(fetch=fetch, checksum="00ff" * 4, duplicate_of=duplicate_of)


def test_a_copy_is_recorded_in_url_state_and_an_original_clears_the_mark():
    copy = url_state_cells(_page(duplicate_of="http://a.test/story"))
    assert copy is not None and json.loads(copy[DUPLICATE_CELL]) == "http://a.test/story"
    original = url_state_cells(_page())
    assert original is not None and json.loads(original[DUPLICATE_CELL]) is None
    state = UrlState.from_cells(copy)  # the extra cell does not disturb the record
    assert (state.state, state.status, state.checksum, state.fetched_at_ms) == ("fetched", 200, "00ff" * 4, 12500)


def test_an_error_leaves_the_mark_as_it_was_and_robots_writes_nothing():
    failed = url_state_cells(_page(outcome="error"))
    assert failed is not None and DUPLICATE_CELL not in failed and json.loads(failed["u:state"]) == "error"
    assert url_state_cells(_page(source="robots")) is None
