"""Due rows as their stored cells (schemas/due_rows.py): every row comes back equal through
the coder and pickle, a row that does not decode is set aside alone with its key, the select's
peek at a cell agrees with the whole decode and raises nothing but CellError, the rows
cross a shuffle in fewer bytes than the pickled entries they replace, and a fetch takes them
one at a time (EntryCursor), giving back the rest as rows."""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cells import _mutations, entries  # tests/schemas/test_cells.py

from beamcrawl.schemas import cells as cellfmt
from beamcrawl.schemas.coders import DueRowsCoder, PackedCoder
from beamcrawl.schemas.due_rows import DueRows, EntryCursor, due_rows_by_host, entries_of
from beamcrawl.schemas.records import JSON_CELL, FrontierEntry, Packed


@settings(max_examples=150, deadline=None)
@given(st.lists(entries, max_size=12))
def test_rows_come_back_equal_through_the_coder_and_pickle(rows: list[FrontierEntry]) -> None:
    due = DueRows.of_entries(rows)
    coder = DueRowsCoder()
    for back in (coder.decode(coder.encode(due)), pickle.loads(pickle.dumps(due, pickle.HIGHEST_PROTOCOL))):
        assert back == due and len(back) == len(rows)
        assert list(back) == rows
        good, bad = back.decode()
        assert good == rows and bad == []
    assert coder.estimate_size(due) == len(coder.encode(due))


def test_an_empty_set_of_rows_holds_nothing() -> None:
    for due in (DueRows(), DueRows.of_cells([])):
        assert len(due) == 0 and list(due) == [] and due.decode() == ([], [])


def _undecodable() -> tuple[FrontierEntry, bytes]:
    """An entry and its cell made undecodable: a binary cell whose layout holds (the select's
    peek passes it) but whose revisit state is not JSON, so only the whole decode finds it."""
    broken = FrontierEntry(url="http://a.example/x", fp=77, host="a.example", due_ms=1234, revisit={"v": 1})
    return broken, broken.to_cells()[JSON_CELL].replace(b'{"v":1}', b'{"v":]}')


@settings(max_examples=150, deadline=None)
@given(st.lists(entries, min_size=1, max_size=8), st.data())
def test_a_row_that_does_not_decode_is_set_aside_alone_with_its_key(rows: list[FrontierEntry], data) -> None:
    cells = [row.to_cells()[JSON_CELL] for row in rows]
    at = data.draw(st.integers(0, len(cells)))
    broken, raw = _undecodable()
    assert cellfmt.is_binary(raw)
    assert cellfmt.peek_frontier(raw) == ("a.example", 1234, 77)
    cells.insert(at, raw)
    good, bad = DueRows.of_cells(cells).decode()
    assert good == rows
    assert [key for key, _exc in bad] == [broken.key.hex()]
    with pytest.raises(ValueError):
        list(DueRows.of_cells(cells))  # iterating decodes strictly
    failed: list = []
    assert entries_of([DueRows.of_cells(cells), Packed(rows)], failed) == rows + rows
    assert [key for key, _exc in failed] == [broken.key.hex()]


@settings(max_examples=300, deadline=None)
@given(entries)
def test_the_peek_agrees_with_the_whole_decode(entry: FrontierEntry) -> None:
    raw = entry.to_cells()[JSON_CELL]
    if not cellfmt.is_binary(raw):  # a value the layout cannot hold: the JSON cell, decoded whole
        return
    decoded = FrontierEntry.from_cells({JSON_CELL: raw})
    assert cellfmt.peek_frontier(raw) == (decoded.host, decoded.due_ms, decoded.fp)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200) | st.binary(max_size=120).map(lambda b: b"\x01" + b))
def test_the_peek_at_garbage_raises_a_cell_error_and_nothing_else(raw: bytes) -> None:
    try:
        cellfmt.peek_frontier(raw)
    except cellfmt.CellError:
        pass


def test_a_cut_cell_never_peeks() -> None:
    raw = FrontierEntry(url="http://a.example/x", fp=9, host="a.example", due_ms=5).to_cells()[JSON_CELL]
    for short in (raw[:n] for n in range(len(raw))):
        with pytest.raises(cellfmt.CellError):
            cellfmt.peek_frontier(short)
    for bad in _mutations(raw):
        try:
            cellfmt.peek_frontier(bad)
        except cellfmt.CellError:
            pass


def test_rows_are_grouped_by_host_in_order_of_first_appearance() -> None:
    rows = [FrontierEntry(url=f"http://{h}/{i}", fp=i, host=h, due_ms=i) for i, h in enumerate("abacb")]
    grouped = list(due_rows_by_host((row.host, row.to_cells()[JSON_CELL]) for row in rows))
    assert [(host, [e.fp for e in due]) for host, due in grouped] == [("a", [0, 2]), ("b", [1, 4]), ("c", [3])]


def test_a_hosts_rows_cross_a_shuffle_in_a_fraction_of_their_pickle() -> None:
    # One host's due rows as a crawl queues them: discovered links of one site, a few revisits.
    rows = [
        FrontierEntry(
            url=f"http://shop-{n % 7}.example.com/catalogue/item-{n * 7919 % 100003}.html",
            fp=(n * 0x9E3779B97F4A7C15) % 2**64,
            host="shop-3.example.com",
            due_ms=1_796_000_000_000 + n * 137,
            priority=0.5 / (1 + n % 4),
            depth=1 + n % 5,
            source="link" if n % 9 else "revisit",
            inlinks=n % 3,
            revisit={"visits": n % 4, "lam": 0.01 * (n % 7), "etag": None} if n % 9 == 0 else None,
        )
        for n in range(400)
    ]
    due_bytes = len(DueRowsCoder().encode(DueRows.of_entries(rows)))
    packed_bytes = len(PackedCoder().encode(Packed(rows)))
    assert due_bytes * 2 < packed_bytes, (due_bytes, packed_bytes)


def test_a_json_row_written_before_travels_and_decodes() -> None:
    entry = FrontierEntry(url="http://old.example/", fp=3, host="old.example", due_ms=10, revisit={"visits": 1})
    old = json.dumps(entry.values()).encode()
    assert not cellfmt.is_binary(old)
    assert list(DueRows.of_cells([old, entry.to_cells()[JSON_CELL]])) == [entry, entry]


@settings(max_examples=200, deadline=None)
@given(st.lists(entries, max_size=12), st.data())
def test_a_cursor_takes_rows_in_order_and_gives_back_the_rest_as_rows(rows: list[FrontierEntry], data) -> None:
    # The fetcher takes a host's URLs one at a time and, when the window ends, gives back the
    # rest, with or without the one it took last (taken, not fetched): the rest is every row
    # not taken, in order, as rows (never decoded), and the cursor is done after it.
    taken_n = data.draw(st.integers(0, len(rows)))
    with_last = data.draw(st.booleans())
    for source in (DueRows.of_entries(rows), list(rows)):
        cursor = EntryCursor(source)
        assert len(cursor) == len(rows)
        taken = [next(cursor) for _ in range(taken_n)]
        assert taken == rows[:taken_n] and len(cursor) == len(rows) - taken_n
        rest = cursor.rest(with_last=with_last)
        start = taken_n - 1 if with_last and taken_n else taken_n
        assert type(rest) is type(source)
        assert list(rest) == rows[start:] and len(rest) == len(rows) - start
        assert len(cursor) == 0 and list(cursor) == []
        if start == 0 and type(source) is DueRows:
            assert rest is source  # a host that had not begun: its rows as they came


def test_a_cursor_never_decodes_what_it_does_not_take(monkeypatch) -> None:
    rows = [FrontierEntry(url=f"http://a.example/{i}", fp=i + 1, host="a.example", due_ms=i) for i in range(500)]
    due = DueRows.of_entries(rows)
    decoded: list[bytes] = []
    real = FrontierEntry.from_cells

    def counting(cells):
        decoded.append(cells[JSON_CELL])
        return real(cells)

    monkeypatch.setattr(FrontierEntry, "from_cells", counting)
    cursor = EntryCursor(due)
    assert [next(cursor).fp for _ in range(3)] == [1, 2, 3]
    rest = cursor.rest(with_last=True)
    assert len(decoded) == 3  # the rest given back is its rows, not entries
    monkeypatch.setattr(FrontierEntry, "from_cells", real)
    assert [e.fp for e in rest] == list(range(3, 501))


@settings(max_examples=100, deadline=None)
@given(st.lists(entries, min_size=1, max_size=8), st.data())
def test_a_row_that_does_not_decode_is_taken_and_the_cursor_goes_on(rows: list[FrontierEntry], data) -> None:
    cells = [row.to_cells()[JSON_CELL] for row in rows]
    at = data.draw(st.integers(0, len(cells)))
    cells.insert(at, _undecodable()[1])
    cursor = EntryCursor(DueRows.of_cells(cells))
    got = [next(cursor) for _ in range(at)]
    with pytest.raises(ValueError):
        next(cursor)
    assert len(cursor) == len(rows) - at
    assert got + list(cursor.rest()) == rows
