"""Record: the URL-state cells a fetch outcome writes, copies included."""

from __future__ import annotations

import enum
import json
import os

import pytest
from apache_beam.utils.windowed_value import WindowedValue
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamcrawl.core.policy.change_rate import RevisitState
from beamcrawl.core.runtime import files
from beamcrawl.core.runtime.outputs import REQUEUE, RoundOutputs
from beamcrawl.core.urls.urlnorm import fingerprint
from beamcrawl.schemas import cells as cellfmt
from beamcrawl.schemas.records import (
    OUTCOME_CELL,
    REVISIT_CELL,
    FetchResult,
    FrontierEntry,
    ParsedPage,
    UrlState,
    json_cell,
)
from beamcrawl.transforms.dead_letter import ERRORS
from beamcrawl.transforms.record import DUPLICATE_CELL, _StageLinesFn, _WriteRowsFn, url_state_cells


def _page(outcome: str = "fetched", source: str = "link", duplicate_of: str | None = None) -> ParsedPage:
    url = "http://b.test/story"
    entry = FrontierEntry(url=url, fp=fingerprint(url), host="b.test", due_ms=0, source=source)
    fetch = FetchResult(
        entry=entry,
        outcome=outcome,
        url=url,
        status=200 if outcome == "fetched" else 0,
        fetched_at=12.5,
        error=None if outcome == "fetched" else "timeout",
    )
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
    assert failed is not None and DUPLICATE_CELL not in failed and REVISIT_CELL not in failed
    assert (UrlState.from_cells(failed).state, UrlState.from_cells(failed).error) == ("error", "timeout")
    assert url_state_cells(_page(source="robots")) is None


class _Level(enum.IntEnum):
    HIGH = 2


class _Text(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        None, True, False, 0, -1, 200, 1_796_020_045_608, 2**64 + 1, _Level.HIGH, 0.1, 1e300, float("nan"),
        float("inf"), -0.0, "", "http://b.test/story", 'quote " back \\ slash', "ctl \x00\n\t\x1f",
        "naïve café ☃ \U0001f600", "\ud800", _Text("sub"), [1, "a", None], {"checksum": "00ff", "lam": 1.5e-06},
    ],
)  # fmt: skip
def test_json_cell_is_json_dumps(value):
    assert json_cell(value) == json.dumps(value).encode()


def test_url_state_cells_are_the_outcome_in_one_binary_cell_beside_the_revisit_and_the_mark():
    page = _page(duplicate_of="http://a.test/ü")
    page.revisit = {"checksum": "00ff" * 4, "visits": 2, "lam": 1.65e-06, "history": [1.5, 2], "etag": None}
    page.fetch.error = 'naïve "error"'
    cells = url_state_cells(page)
    assert cells is not None and set(cells) == {OUTCOME_CELL, REVISIT_CELL, DUPLICATE_CELL}
    assert cells[OUTCOME_CELL][0] == cellfmt.OUTCOME
    # the cells written on their own are as json.dumps wrote them, as in rows written before,
    # where a value does not fit a binary cell
    assert cells[REVISIT_CELL] == json.dumps(page.revisit).encode()
    assert cells[DUPLICATE_CELL] == json.dumps(page.duplicate_of).encode()
    # a revisit state of other keys than RevisitState's does not fit the binary layout
    assert not cellfmt.is_binary(cells[REVISIT_CELL])
    state = UrlState.from_cells(cells)
    assert (state.url, state.state, state.status, state.fetched_at_ms, state.checksum, state.error) == (
        "http://b.test/story", "fetched", 200, 12500, "00ff" * 4, 'naïve "error"',
    )  # fmt: skip
    assert state.revisit == page.revisit


def test_a_revisit_state_is_a_binary_cell_that_reads_back_equal():
    page = _page()
    page.revisit = RevisitState(
        checksum="00ff" * 4, visits=2, history=[[3600.5, 1], [7200.0, 2]], etag='"v"', next_due=99.5
    ).to_dict()
    cells = url_state_cells(page)
    assert cells is not None and cells[REVISIT_CELL][0] == cellfmt.REVISIT
    assert len(cells[REVISIT_CELL]) < len(json.dumps(page.revisit)) / 2
    assert UrlState.from_cells(cells).revisit == page.revisit


def test_the_revisit_cell_encoded_by_freshness_is_the_one_written():
    """Freshness encodes a page's revisit state once (``ParsedPage.revisit_cell``); the URL
    state row writes those bytes, the same as encoding the state here."""
    page = _page()
    page.revisit = RevisitState(checksum="00ff" * 4, visits=1, history=[[60.0, 0]], next_due=99.5).to_dict()
    encoded_here = url_state_cells(page)
    page.revisit_cell = cellfmt.encode_revisit(page.revisit)
    assert page.revisit_cell is not None
    cells = url_state_cells(page)
    assert cells == encoded_here and cells is not None and cells[REVISIT_CELL] is page.revisit_cell


def test_a_not_modified_answer_records_the_checksum_held():
    page = _page()
    page.fetch.status = 304
    page.checksum = None
    page.revisit = {"checksum": "abcd" * 4, "visits": 3}
    cells = url_state_cells(page)
    assert cells is not None and UrlState.from_cells(cells).checksum == "abcd" * 4


# --- staged lines: written a chunk at a time, the same file as written whole ------------

_LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=30)


@settings(max_examples=60, deadline=None)
@given(
    elements=st.lists(st.one_of(_LINE, st.lists(_LINE, min_size=1, max_size=5)), max_size=40),
    chunk=st.integers(1, 7),
)
def test_staged_lines_written_in_chunks_are_the_file_written_whole(tmp_path_factory, elements, chunk):
    outputs = RoundOutputs(str(tmp_path_factory.mktemp("out")), 3)
    fn = _StageLinesFn(outputs, REQUEUE)
    fn.CHUNK_LINES = chunk
    fn.start_bundle()
    for element in elements:
        fn.process(element)
    folder = outputs.staged(REQUEUE)
    assert files.list_files(folder) == []  # nothing appears before the bundle ends
    fn.finish_bundle()
    lines = [line for e in elements for line in ([e] if isinstance(e, str) else e)]
    staged = files.list_files(folder)
    if not lines:
        assert staged == []
        return
    assert len(staged) == 1
    with open(staged[0], "rb") as fh:
        assert fh.read() == ("\n".join(lines) + "\n").encode("utf-8")
    assert [n for n in os.listdir(folder) if n.startswith(".")] == []  # no temporary left


# --- URL-state rows held and written as sorted runs --------------------------------------

_cells = st.dictionaries(
    st.sampled_from([OUTCOME_CELL, REVISIT_CELL, DUPLICATE_CELL]), st.binary(min_size=0, max_size=40), min_size=1
)
_rows = st.lists(st.tuples(st.binary(min_size=1, max_size=3), _cells), max_size=60)


class _Recorded:
    """The store's ``mutate``, each call's keys noted before the real call."""

    def __init__(self, store):
        self.store = store
        self.calls: list[list[bytes]] = []
        self._mutate = store.mutate
        store.mutate = self

    def __call__(self, table, mutations):
        self.calls.append([m.key for m in mutations])
        return self._mutate(table, mutations)


def _run_fn(store_uri, batches, hold_bytes):
    fn = _WriteRowsFn(store_uri, "urls", hold_bytes)
    fn.setup()
    recorded = _Recorded(fn.store)
    out = []
    try:
        fn.start_bundle()
        for batch in batches:
            out += list(fn.process(batch))
        finished = list(fn.finish_bundle())
        rows = dict(fn.store.read_range("urls"))
    finally:
        fn.teardown()
    return recorded.calls, out, finished, rows


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(_rows, max_size=5),
    hold=st.sampled_from([0, 1, 200, 1 << 20]),
    write_rows=st.sampled_from([1, 7, 1000]),
)
def test_held_rows_land_as_written_batch_by_batch_in_sorted_runs(
    tmp_path_factory, monkeypatch, batches, hold, write_rows
):
    monkeypatch.setattr(_WriteRowsFn, "WRITE_ROWS", write_rows)
    path = tmp_path_factory.mktemp("held") / "s.sqlite"
    calls, out, finished, rows = _run_fn(f"sqlite:///{path}", batches, hold)
    expected: dict[bytes, dict[str, bytes]] = {}
    for key, cells in (row for batch in batches for row in batch):
        expected.setdefault(key, {}).update(cells)  # cell by cell, the later row's value winning
    assert rows == expected
    assert out == [] and finished == []
    written = [key for call in calls for key in call]
    assert sorted(written) == sorted(key for batch in batches for key, _ in batch)
    if hold:
        assert all(call == sorted(call) and len(call) <= write_rows for call in calls)
    else:
        assert calls == [[key for key, _ in batch] for batch in batches]  # as they came


def test_held_rows_wait_for_their_size_or_the_bundle_end(tmp_path):
    batch = [(bytes([k]), {OUTCOME_CELL: b"x" * 100}) for k in (5, 3, 9, 1)]
    size = sum(len(k) + len(OUTCOME_CELL) + len(v) for k, cells in batch for v in cells.values())
    fn = _WriteRowsFn(f"sqlite:///{tmp_path / 's.sqlite'}", "urls", hold_bytes=2 * size)
    fn.setup()
    recorded = _Recorded(fn.store)
    try:
        fn.start_bundle()
        assert list(fn.process(batch)) == [] and recorded.calls == []  # under the size: held
        assert list(fn.process([(bytes([k]), {OUTCOME_CELL: b"y" * 100}) for k in (4, 3)])) == []
        assert recorded.calls == []
        list(fn.process([(b"\x02", {OUTCOME_CELL: b"z" * 100}), (b"\x00", {OUTCOME_CELL: b"z" * 100})]))
        assert recorded.calls == [[b"\x00", b"\x01", b"\x02", b"\x03", b"\x03", b"\x04", b"\x05", b"\x09"]]
        assert list(fn.finish_bundle()) == []  # nothing left to write
        list(fn.process([(b"\x07", {OUTCOME_CELL: b"w"})]))
        assert len(recorded.calls) == 1
        assert list(fn.finish_bundle()) == [] and recorded.calls[-1] == [b"\x07"]
        assert fn.store.read_keys("urls", [b"\x03"])[b"\x03"][OUTCOME_CELL] == b"y" * 100  # the later row
    finally:
        fn.teardown()


@pytest.mark.parametrize(
    "bad",
    [("text key", {OUTCOME_CELL: b"a"}), (None, {OUTCOME_CELL: b"a"}), (b"\x03", {OUTCOME_CELL: None}),
     (b"\x03", None), ("not a row",), 42],
)  # fmt: skip
def test_a_malformed_held_row_is_set_aside_and_the_others_written(tmp_path, bad):
    batch = [(b"\x02", {OUTCOME_CELL: b"a"}), bad, (b"\x01", {OUTCOME_CELL: b"c"})]
    calls, out, finished, rows = _run_fn(f"sqlite:///{tmp_path / 's.sqlite'}", [batch], hold_bytes=1 << 20)
    assert out == [] and [f.tag for f in finished] == [ERRORS]
    assert finished[0].value.value.stage == "record"
    assert rows == {b"\x01": {OUTCOME_CELL: b"c"}, b"\x02": {OUTCOME_CELL: b"a"}}


def test_a_refused_held_row_is_one_dead_letter_from_the_bundle_end(tmp_path):
    batch = [(b"\x02", {OUTCOME_CELL: b"a"}), (b"", {OUTCOME_CELL: b"b"}), (b"\x01", {OUTCOME_CELL: b"c"})]
    calls, out, finished, rows = _run_fn(f"sqlite:///{tmp_path / 's.sqlite'}", [batch], hold_bytes=1 << 20)
    assert out == []
    assert len(finished) == 1 and finished[0].tag == ERRORS
    assert isinstance(finished[0].value, WindowedValue)
    letter = finished[0].value.value
    assert (letter.stage, letter.exception) == ("record", "ValueError") and "empty" in letter.message
    assert set(rows) == {b"\x01", b"\x02"}
