"""The staged requeue lines: a next visit's frontier row as the commit writes it."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.policy.change_rate import RevisitState
from beamcrawl.schemas import cells as cellfmt
from beamcrawl.schemas.records import JSON_CELL, FrontierEntry
from beamcrawl.state.frontier import read_requeue_line, requeue_text

_text = st.text(max_size=30)
_revisits = st.none() | st.builds(
    lambda visits, checked, history, etag: RevisitState(
        visits=visits, checked_at=checked, history=history, etag=etag, next_due=2e9
    ).to_dict(),
    st.integers(0, 9),
    st.none() | st.floats(0, 2e9),
    st.lists(st.tuples(st.floats(0.001, 1e7), st.integers(0, 2)).map(list), max_size=4),
    st.none() | _text,
)
entries = st.builds(
    FrontierEntry,
    url=_text,
    fp=st.integers(0, 2**64 - 1),
    host=_text,
    due_ms=st.integers(0, 2**62),
    priority=st.floats(0, 10) | st.integers(0, 3),  # an int priority does not fit the binary cell
    source=st.sampled_from(["revisit", "link"]),
    revisit=_revisits,
    also_keys=st.lists(st.text("0123456789abcdef", min_size=32, max_size=32), max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(entries)
def test_a_staged_line_is_the_row_the_commit_writes_and_reads_back_equal(entry: FrontierEntry) -> None:
    line = requeue_text(entry)
    assert "\n" not in line and line.isascii()
    key, cells = read_requeue_line(line)
    assert key == entry.key and cells == entry.to_cells()  # the cell as staged, not encoded again
    assert FrontierEntry.from_cells(cells) == entry


@settings(max_examples=200, deadline=None)
@given(entries)
def test_a_revisit_state_encoded_by_the_caller_gives_the_same_line(entry: FrontierEntry) -> None:
    """``ParsedPage.revisit_cell``, encoded once by freshness, stands for encoding the
    entry's revisit state again; None (none, or a state that needs JSON) is encoded here."""
    given_cell = None if entry.revisit is None else cellfmt.encode_revisit(entry.revisit)
    assert requeue_text(entry, given_cell) == requeue_text(entry)
    assert entry.to_cells(given_cell) == entry.to_cells()


@settings(max_examples=100, deadline=None)
@given(entries)
def test_a_line_staged_as_json_by_an_earlier_version_reads_the_same(entry: FrontierEntry) -> None:
    """A commit resumed after an upgrade finds the lines the earlier version staged."""
    key, cells = read_requeue_line(entry.key.hex() + " " + entry.to_json())
    assert key == entry.key and FrontierEntry.from_cells(cells) == entry


def test_a_staged_binary_cell_is_smaller_than_the_json_line_it_replaces() -> None:
    revisit = RevisitState(checksum="ac66df46ac5c7071", visits=2, history=[[3600.0, 1]], next_due=2e9).to_dict()
    entry = FrontierEntry(url="http://a.example/p/1.html", fp=7, host="a.example", due_ms=2, revisit=revisit)
    cell = entry.to_cells()[JSON_CELL]
    assert cell[0] == cellfmt.FRONTIER
    assert requeue_text(entry).endswith(base64.b64encode(cell).decode())
    assert len(requeue_text(entry)) < len(entry.to_json())


@pytest.mark.parametrize(
    "line",
    [
        "00ff not-base64!",
        "00ff " + base64.b64encode(b"\x01garbage").decode(),  # a binary cell whose lengths do not add up
        "00ff " + base64.b64encode(b"[1, 2]").decode(),  # JSON that is not a frontier row
        "00ff {not json",
        "zz " + base64.b64encode(b"{}").decode(),
    ],
)
def test_a_line_that_is_not_a_staged_row_raises_a_value_error(line: str) -> None:
    with pytest.raises(ValueError):
        read_requeue_line(line)
