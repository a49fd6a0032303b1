"""The staged hold lines: a known URL's redirect hold and where its pending visit may be, as the
round's commit reads them; and the keys a seen-set row names, whatever its cells hold."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.policy.change_rate import RevisitState
from beamcrawl.schemas.records import QUEUED_CELL, REVISIT_CELL, UrlState, frontier_key, revisit_cell
from beamcrawl.state.frontier import HOLD_CELL, Hold, hold_text, pending_keys, read_hold_lines

_FPS = st.integers(0, 2**64 - 1)
_MS = st.integers(0, 2**63 - 1)
_HOLDS = st.builds(Hold, _MS, st.frozensets(st.builds(frontier_key, _MS, _FPS), max_size=4))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), _HOLDS), max_size=12))
def test_hold_lines_read_back_as_each_urls_later_hold_and_every_key_named(offers):
    """Of one URL's holds, staged by any buckets in any order, the later due time stands and
    every key any of them names is looked at."""
    lines = [hold_text(fp, hold) for fp, hold in offers]
    read = read_hold_lines(lines)
    expected: dict[int, Hold] = {}
    for fp, hold in offers:
        expected[fp] = Hold(
            max(hold.due_ms, expected[fp].due_ms) if fp in expected else hold.due_ms,
            hold.keys | (expected[fp].keys if fp in expected else frozenset()),
        )
    assert read == expected


_CELLS = st.dictionaries(
    st.sampled_from((QUEUED_CELL, REVISIT_CELL, HOLD_CELL, "u:o", "u:url", "u:depth")),
    st.binary(max_size=40)
    | st.sampled_from((b"{}", b"[]", b"null", b"12", b"-5", b"\x00\x00", b"99999999999999999999")),
)


@settings(max_examples=300, deadline=None)
@given(fp=_FPS, cells=st.none() | _CELLS)
def test_a_seen_rows_cells_of_any_shape_name_only_keys_of_its_url(fp, cells):
    """A cell that does not decode names nothing, and nothing raises."""
    keys = pending_keys(fp, cells)
    assert all(len(k) == 16 and k[8:] == fp.to_bytes(8, "big") for k in keys)


@given(fp=_FPS, first=_MS, due=st.none() | st.integers(0, 2**40), hold=st.none() | _MS)
def test_a_seen_row_names_its_queued_row_its_revisit_and_its_last_hold(fp, first, due, hold):
    cells = UrlState.discovered_cells("http://a.test/", first, "link", 1)
    expected = {frontier_key(first, fp)}
    if due is not None:
        state = RevisitState()
        state.next_due = due / 1000
        cells[REVISIT_CELL] = revisit_cell(state.to_dict())
        expected.add(frontier_key(int(state.next_due * 1000), fp))
    if hold is not None:
        cells[HOLD_CELL] = str(hold).encode()
        expected.add(frontier_key(hold, fp))
    assert set(pending_keys(fp, cells)) == expected
