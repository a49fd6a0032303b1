"""The compact binary cells: every value round-trips, JSON cells written before still read,
and no bytes at all (truncated, garbage, another format) make a decoder raise anything but
CellError, nor a reader fail."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.policy.change_rate import RevisitState
from beamcrawl.schemas import cells as cellfmt
from beamcrawl.schemas.records import (
    JSON_CELL,
    OUTCOME_CELL,
    QUEUED_CELL,
    REVISIT_CELL,
    UNREADABLE_CELLS,
    FrontierEntry,
    UrlState,
    _encode,
    revisit_cell,
)
from beamcrawl.transforms.content_seen import Probe
from beamcrawl.state.content_rows import (
    CONTENT_CELL,
    ContentRecord,
    parse_simhash_cells,
    simhash_value,
    names_from_rows,
    read_content_rows,
    simhash_cells,
)

text = st.text(max_size=40) | st.sampled_from(["", "\ud800", "naïve ☃ \U0001f600", "a\x00b"])
i64 = st.integers(-(2**63), 2**63 - 1)
u64 = st.integers(0, 2**64 - 1)
# Ints and floats of any size or kind: those the layout cannot hold fall back to JSON.
any_int = i64 | st.integers(-(2**70), 2**70)
floats = st.floats(allow_nan=False) | st.just(float("inf"))
# Revisit states: RevisitState.to_dict()'s keys and types (binary), and dicts of other keys
# or types (JSON): an int where a float was, a history pair of other kinds.
_opt_floats = st.none() | floats
revisit_states = st.fixed_dictionaries(
    {
        "importance": floats, "lam": floats, "prior_rate": _opt_floats, "status": st.none() | any_int,
        "etag": st.none() | text, "last_modified": st.none() | text, "checksum": st.none() | text,
        "simhash": st.none() | text, "visits": any_int, "changes": any_int,
        "history": st.lists(st.lists(floats, min_size=1, max_size=1).map(lambda v: [v[0], 1]) | st.tuples(
            floats | st.integers(0, 5), st.integers(-1, 300) | st.booleans()
        ).map(list), max_size=16),
        "outcomes": text, "checked_at": _opt_floats, "changed_at": _opt_floats, "stored_at": _opt_floats,
        "digest": st.none() | text, "misses": any_int, "errors": any_int, "moved_to": st.none() | text,
        "next_due": _opt_floats, "lastmod_agree": floats | st.integers(0, 3), "lastmod_disagree": floats,
    }
)  # fmt: skip
revisits = (
    st.none()
    | st.fixed_dictionaries({"visits": st.integers(0, 9), "etag": st.none() | text, "lam": floats})
    | revisit_states
)

entries = st.builds(
    FrontierEntry,
    url=text,
    fp=u64 | st.integers(-5, 2**65),
    host=text,
    due_ms=any_int,
    priority=floats | st.integers(0, 3),
    depth=any_int,
    source=text,
    inlinks=any_int,
    also_keys=st.lists(text, max_size=3),
    deferrals=any_int,
    kind=text,
    hops=any_int,
    reason=text,
    lastmod=st.none() | floats | st.integers(0, 10),
    robots_origin=st.none() | text,
    revisit=revisits,
)


@settings(max_examples=300, deadline=None)
@given(entries)
def test_a_frontier_entry_comes_back_equal_with_its_types(entry: FrontierEntry) -> None:
    cells = entry.to_cells()
    back = FrontierEntry.from_cells(cells)
    assert back == entry
    assert [type(v) for v in back.values().values()] == [type(v) for v in entry.values().values()]


def test_an_ordinary_frontier_entry_is_binary_and_smaller_than_its_json() -> None:
    entry = FrontierEntry(
        url="http://a.example/some/path?q=1", fp=2**63 + 5, host="a.example", due_ms=1_800_000_000_000
    )
    raw = entry.to_cells()[JSON_CELL]
    assert raw[0] == cellfmt.FRONTIER and cellfmt.is_binary(raw)
    assert len(raw) < len(_encode(entry)[JSON_CELL]) * 0.6
    # An entry the layout cannot hold exactly (an int priority) is written as JSON, as before.
    odd = dataclasses.replace(entry, priority=1)
    assert odd.to_cells() == _encode(odd)


@settings(max_examples=200, deadline=None)
@given(entries)
def test_a_frontier_row_written_as_json_before_reads_the_same(entry: FrontierEntry) -> None:
    assert FrontierEntry.from_cells(_encode(entry)) == entry  # what to_cells wrote until now


@settings(max_examples=200, deadline=None)
@given(text, any_int, st.none() | text, st.none() | any_int)
def test_a_discovery_cell_comes_back_equal_in_both_formats(url, first_seen, source, depth) -> None:
    cells = UrlState.discovered_cells(url, first_seen, source, depth)
    old = {QUEUED_CELL: json.dumps([url, first_seen, source, depth], separators=(",", ":")).encode()}
    for written in (cells, old):
        state = UrlState.from_cells(written)
        assert (state.url, state.first_seen_ms, state.source, state.depth, state.state) == (
            url,
            first_seen,
            source,
            depth,
            "queued",
        )


outcomes = st.builds(
    UrlState,
    url=text,
    state=st.sampled_from(["fetched", "error", "refused", "robots_disallowed", "usage_refused"]) | text,
    status=st.none() | any_int,
    fetched_at_ms=st.none() | any_int,
    checksum=st.none() | text,
    error=st.none() | text | st.sampled_from(["x" * 65_535, "é" * 40_000, "x" * 70_000]),
)
_OUTCOME_FIELDS = ("url", "state", "status", "fetched_at_ms", "checksum", "error")


def _outcome(state: UrlState) -> tuple:
    return tuple(getattr(state, name) for name in _OUTCOME_FIELDS)


@settings(max_examples=300, deadline=None)
@given(outcomes)
def test_a_fetch_outcome_comes_back_equal_in_both_formats(written: UrlState) -> None:
    """The ``u:o`` cell round-trips every value with its type: binary where the layout holds
    it exactly, a JSON array where it does not (an int past 64 bits, a string past 65,535
    bytes); a row of the ``u:<field>`` cells written before reads the same."""
    cells = written.outcome_cells()
    assert list(cells) == [OUTCOME_CELL]
    fits = all(v is None or -(2**63) <= v < 2**63 for v in (written.status, written.fetched_at_ms)) and all(
        v is None or len(v.encode("utf-8", "surrogatepass")) <= 65_535 for v in (written.url, written.error)
    )
    assert cellfmt.is_binary(cells[OUTCOME_CELL]) == fits
    old = written.to_cells(only=_OUTCOME_FIELDS)
    for row in (cells, old):
        read = UrlState.from_cells(row)
        assert _outcome(read) == _outcome(written)
        assert [type(v) for v in _outcome(read)] == [type(v) for v in _outcome(written)]


def test_a_fetch_outcome_wins_over_the_cells_of_rows_written_before_and_keeps_the_rest() -> None:
    """A row from before the ``u:o`` cell holds one JSON cell per field; the next fetch's
    outcome is written over it as one cell, and its fields are the ones read. The fields it
    does not pack (discovery, revisit, reason) are kept."""
    before = UrlState(url="http://a.example/x", state="error", status=None, fetched_at_ms=5, error="timeout")
    row = {
        **UrlState.discovered_cells("http://a.example/x", 3, "link", 2),
        **before.to_cells(only=_OUTCOME_FIELDS),
        "u:revisit": b'{"visits": 1}',
        "u:reason": b'"asked"',
    }
    fetched = UrlState(url="http://a.example/x", state="fetched", status=200, fetched_at_ms=9, checksum="ab")
    row.update(fetched.outcome_cells())
    read = UrlState.from_cells(row)
    assert _outcome(read) == ("http://a.example/x", "fetched", 200, 9, "ab", None)
    assert (read.first_seen_ms, read.source, read.depth) == (3, "link", 2)
    assert (read.revisit, read.reason) == ({"visits": 1}, "asked")


def test_an_ordinary_fetch_outcome_is_one_cell_no_larger_than_its_json_cells() -> None:
    state = UrlState(url="http://a.example/p/1.html", state="fetched", status=200, fetched_at_ms=1_796_288_668_798)
    state.checksum = "ac66df46ac5c7071"
    packed = state.outcome_cells()[OUTCOME_CELL]
    assert packed[0] == cellfmt.OUTCOME
    assert len(packed) <= sum(len(v) for v in state.to_cells(only=_OUTCOME_FIELDS).values())


def _typed(value):
    """A value with the type of each of its parts (1 and 1.0 and True differ)."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


@settings(max_examples=400, deadline=None)
@given(revisit_states)
def test_a_revisit_state_comes_back_equal_with_its_types_in_either_format(state: dict) -> None:
    raw = cellfmt.encode_revisit(state)
    fits = (
        all(type(state[k]) is float for k in ("importance", "lam", "lastmod_agree", "lastmod_disagree"))
        and all(type(h[0]) is float and type(h[1]) is int and 0 <= h[1] < 256 for h in state["history"])
        and all(
            state[k] is None or -(2**63) <= state[k] < 2**63
            for k in ("status", "visits", "changes", "misses", "errors")
        )
        and all(
            len((state[k] or "").encode("utf-8", "surrogatepass")) < 2**16
            for k in ("etag", "last_modified", "checksum", "simhash", "outcomes", "digest", "moved_to")
        )
    )
    assert (raw is not None) == fits
    if raw is not None:
        assert cellfmt.is_binary(raw) and raw[0] == cellfmt.REVISIT
        back = cellfmt.decode_revisit(raw)
        assert _typed(back) == _typed(state) and list(back) == list(RevisitState().to_dict())
    cell = revisit_cell(state)
    assert _typed(
        UrlState.from_cells({**UrlState.discovered_cells("u", 1, None, None), REVISIT_CELL: cell}).revisit
    ) == (_typed(state))


def test_a_revisit_state_of_a_real_schedule_is_binary_and_under_half_its_json() -> None:
    state = RevisitState(
        checksum="ac66df46ac5c7071", simhash="a101238aa93e6d88", visits=3, changes=1, outcomes="FFF",
        history=[[3600.0, 0], [7200.5, 1]], checked_at=1.8e9, changed_at=1.8e9, stored_at=1.8e9,
        digest="sha1:4EBD6VIBT6TER7GZOPP7MKGJC3G6BFZQ", next_due=1.9e9, status=200, etag='"x"',
    ).to_dict()  # fmt: skip
    raw = cellfmt.encode_revisit(state)
    assert raw is not None and cellfmt.decode_revisit(raw) == state
    assert len(raw) < len(json.dumps(state)) / 2
    entry = FrontierEntry(url="http://a.example/", fp=1, host="a.example", due_ms=5, revisit=state)
    cell = entry.to_cells()[JSON_CELL]
    assert raw in cell and FrontierEntry.from_cells({JSON_CELL: cell}).revisit == state


content_records = st.builds(
    ContentRecord,
    url=text,
    kind=st.sampled_from(["exact", "near"]) | text,
    fetched_at=st.none() | floats | st.integers(0, 9),
    digest=st.none() | text,
    distance=any_int,
    round=st.none() | any_int,
)


@settings(max_examples=300, deadline=None)
@given(content_records)
def test_a_content_record_comes_back_equal_in_both_formats(record: ContentRecord) -> None:
    old = {CONTENT_CELL: json.dumps(dataclasses.asdict(record), separators=(",", ":")).encode()}
    assert ContentRecord.from_cells(record.to_cells()) == record
    assert ContentRecord.from_cells(old) == record


@settings(max_examples=200, deadline=None)
@given(text, u64, u64, st.none() | st.integers(0, 2**32 - 1) | st.integers(2**32, 2**40))
def test_simhash_cells_come_back_equal_in_both_formats(url, fp, url_fp, round_no) -> None:
    rows = simhash_cells(Probe(url, url_fp, 1, fp, 1.0, "d"), round_no)
    column = f"s:{fp:016x}{url_fp:016x}"
    assert [list(m.cells) for m in rows] == [[column]] * 20
    assert simhash_value(rows[0].cells[column]) == (url, round_no)
    assert {m.cells[column] for m in rows[1:]} == {cellfmt.SIMHASH_SEEN_CELL}
    assert simhash_value(cellfmt.SIMHASH_SEEN_CELL) == (None, None)
    # JSON cells as written before: the name and round, the round alone, the name in all.
    for raw, want in (
        (json.dumps({"url": url, "round": round_no}).encode(), (url, round_no)),
        (json.dumps(round_no).encode(), (None, round_no)),
    ):
        assert simhash_value(raw) == want
    usable = round_no is None or round_no < 2**41
    assert parse_simhash_cells(rows[0].cells, 2**41) == ([(fp, url_fp, url)] if usable else [])
    assert names_from_rows([(fp, url_fp)], {rows[0].key: rows[0].cells}) == {(fp, url_fp): url}
    # The first table's round decides for all 20: a row of this round or a later one is no name.
    named_in = names_from_rows([(fp, url_fp)], {rows[0].key: rows[0].cells}, round_no=2**41)
    assert named_in == ({(fp, url_fp): url} if usable else {})
    if round_no is not None:
        assert names_from_rows([(fp, url_fp)], {rows[0].key: rows[0].cells}, round_no=round_no) == {}


# --- hostile bytes --------------------------------------------------------------------------


def _mutations(raw: bytes) -> list[bytes]:
    """``raw`` cut short at every length, and with a byte flipped at a few places."""
    out = [raw[:n] for n in range(len(raw))]
    for at in range(0, len(raw), max(1, len(raw) // 7)):
        out.append(raw[:at] + bytes((raw[at] ^ 0xFF,)) + raw[at + 1 :])
    return out


_DECODERS = (
    cellfmt.decode_frontier,
    cellfmt.decode_queued,
    cellfmt.decode_outcome,
    cellfmt.decode_revisit,
    cellfmt.decode_content,
    cellfmt.decode_simhash,
    cellfmt.decode_clock,
    cellfmt.decode_clock_errors,
)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=120) | st.binary(max_size=120).map(lambda b: bytes((1 + len(b) % 8,)) + b))
def test_garbage_raises_a_cell_error_and_nothing_else(raw: bytes) -> None:
    for decode in _DECODERS:
        try:
            decode(raw)
        except cellfmt.CellError:
            pass


def test_truncated_and_flipped_cells_raise_cell_errors_or_decode_to_their_kind() -> None:
    entry = FrontierEntry(
        url="http://a.example/x", fp=9, host="a.example", due_ms=5, also_keys=["00ff"], revisit={"visits": 2}
    )
    samples = [
        (entry.to_cells()[JSON_CELL], cellfmt.decode_frontier),
        (UrlState.discovered_cells("http://a.example/", 7, "link", 2)[QUEUED_CELL], cellfmt.decode_queued),
        (
            UrlState(
                "http://a.example/", state="error", status=503, fetched_at_ms=8, checksum="c", error="e"
            ).outcome_cells()[OUTCOME_CELL],
            cellfmt.decode_outcome,
        ),
        (
            cellfmt.encode_revisit(RevisitState(checksum="c", history=[[1.5, 1]], etag="e", next_due=3.0).to_dict()),
            cellfmt.decode_revisit,
        ),
        (
            ContentRecord("http://a.example/", "exact", 1.5, "sha1:X", 0, 3).to_cells()[CONTENT_CELL],
            cellfmt.decode_content,
        ),
        (cellfmt.encode_simhash_named("http://a.example/", 3), cellfmt.decode_simhash),
        (cellfmt.SIMHASH_SEEN_CELL, cellfmt.decode_simhash),
        (cellfmt.encode_clock(1.5e9, 1.4e9, 2.0, 0.0), cellfmt.decode_clock),
        (cellfmt.encode_clock(1.5e9, 1.4e9, 2.0, 0.0, 3), cellfmt.decode_clock_errors),
    ]
    for raw, decode in samples:
        assert raw is not None
        for bad in _mutations(raw):
            try:
                decode(bad)
            except cellfmt.CellError:
                pass
        for short in (raw[:n] for n in range(len(raw))):
            with pytest.raises(cellfmt.CellError):
                decode(short)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80) | st.sampled_from([b"", b"[1]", b"{}", b'"x"', b"null", b"[1, 2", b"\x01", b"\x05"]))
def test_readers_take_a_bad_cell_as_no_cell(raw: bytes) -> None:
    """The frontier's reader raises ValueError (select sets the row aside, counted); the
    others read the cell as absent, counted, and go on."""
    try:
        FrontierEntry.from_cells({JSON_CELL: raw})
    except ValueError:
        pass
    before = UNREADABLE_CELLS[QUEUED_CELL]
    state = UrlState.from_cells({QUEUED_CELL: raw, "u:state": b'"fetched"'})
    assert state.state == "fetched"
    if state.url == "":
        assert UNREADABLE_CELLS[QUEUED_CELL] == before + 1
    assert UrlState.from_cells({QUEUED_CELL: raw, "u:url": b'"http://a.example/"'}).url == "http://a.example/"
    before = UNREADABLE_CELLS[OUTCOME_CELL]
    state = UrlState.from_cells({OUTCOME_CELL: raw, "u:state": b'"error"'})
    assert state.state in ("error", "fetched") or UNREADABLE_CELLS[OUTCOME_CELL] == before
    if state.url == "":
        assert UNREADABLE_CELLS[OUTCOME_CELL] == before + 1 and state.state == "error"
    queued = UrlState.discovered_cells("http://a.example/", 7, "link", 2)
    assert UrlState.from_cells({**queued, OUTCOME_CELL: raw}).first_seen_ms == 7
    revisit = UrlState.from_cells({**queued, REVISIT_CELL: raw}).revisit
    if cellfmt.is_binary(raw):  # else JSON: the value as written
        assert revisit is None or set(revisit) == set(RevisitState().to_dict())
    rows = list(read_content_rows([(b"\x00" * 8, {CONTENT_CELL: raw}), (b"\x00" * 7 + b"\x01", {})]))
    assert all(isinstance(r, ContentRecord) for _, r in rows)
    assert isinstance(parse_simhash_cells({"s:" + "0" * 32: raw, "s:zz": b"1"}, 5), list)
    assert isinstance(names_from_rows([(0, 0)], {b"k": {"s:" + "0" * 32: raw}}), dict)
