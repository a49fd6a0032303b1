"""The records' store row formats (schemas/records.py): keys that sort as the crawl needs, cells
that come back equal, rows from a newer version that still load, rows that do not decode.

(How records pickle across shuffles is tests/schemas/test_shuffled_records.py.)
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.schemas.records import (
    JSON_CELL,
    QUEUED_CELL,
    FrontierEntry,
    HostPolicy,
    HostRecord,
    UrlState,
    fp_key,
    frontier_key,
    json_cell,
    key_fp,
    packed_by_host,
)

u64 = st.integers(min_value=0, max_value=2**64 - 1)
due = st.integers(min_value=0, max_value=2**63 - 1)
text = st.text(max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(due, u64), min_size=2, max_size=20))
def test_frontier_keys_sort_by_due_time_then_fingerprint(pairs: list[tuple[int, int]]) -> None:
    """ "Everything due by now" is one range scan from the start of the table."""
    assert sorted(pairs, key=lambda p: frontier_key(*p)) == sorted(pairs)
    assert all(key_fp(frontier_key(d, fp)[8:]) == fp for d, fp in pairs)


@settings(max_examples=200, deadline=None)
@given(st.lists(u64, min_size=1, max_size=20))
def test_seen_set_keys_are_the_fingerprint_and_sort_like_it(fps: list[int]) -> None:
    assert [key_fp(fp_key(fp)) for fp in fps] == fps
    assert sorted(fps, key=fp_key) == sorted(fps)
    assert all(len(fp_key(fp)) == 8 for fp in fps)


entries = st.builds(
    FrontierEntry,
    url=text,
    fp=u64,
    host=text,
    due_ms=due,
    priority=st.floats(allow_nan=False, allow_infinity=False),
    depth=st.integers(min_value=0, max_value=100),
    source=st.sampled_from(["seed", "link", "redirect", "sitemap", "submit", "revisit"]),
    also_keys=st.lists(st.binary(min_size=16, max_size=16).map(bytes.hex), max_size=3),
    reason=text,
    lastmod=st.none() | st.floats(min_value=0, max_value=4e9),
    revisit=st.none() | st.fixed_dictionaries({"visits": st.integers(0, 9), "etag": st.none() | text}),
)


@settings(max_examples=150, deadline=None)
@given(entries)
def test_a_frontier_row_comes_back_equal(entry: FrontierEntry) -> None:
    cells = entry.to_cells()
    assert set(cells) == {JSON_CELL}
    assert FrontierEntry.from_cells(cells) == entry
    assert entry.key == frontier_key(entry.due_ms, entry.fp)


def test_a_row_written_by_a_newer_version_still_loads() -> None:
    """A field added since is dropped, not an error: old workers read new rows mid-upgrade."""
    entry = FrontierEntry(url="http://a.example/", fp=5, host="a.example", due_ms=10)
    row = json.loads(entry.to_json())
    newer = {JSON_CELL: json.dumps({**row, "added_later": [1, 2]}).encode()}
    assert FrontierEntry.from_cells(newer) == entry
    record = HostRecord("a.example", delay=2.5)
    row = json.loads(record.to_cells()[JSON_CELL])
    assert HostRecord.from_cells("a.example", {JSON_CELL: json.dumps({**row, "x": 1}).encode()}) == record


@pytest.mark.parametrize("cells", [{}, {"r:other": b"{}"}, {JSON_CELL: b"{not json"}, {JSON_CELL: b"\xff\xfe"}])
def test_a_frontier_row_that_does_not_decode_raises_a_value_error(cells: dict[str, bytes]) -> None:
    """A bad row is the caller's to set aside (select counts it); it never loads as something else."""
    with pytest.raises(ValueError):
        FrontierEntry.from_cells(cells)


def test_absent_host_rows_mean_defaults_and_no_policy() -> None:
    assert HostRecord.from_cells("a.example", None) == HostRecord("a.example")
    assert HostRecord.from_cells("a.example", {}) == HostRecord("a.example")
    assert HostPolicy.from_cells("a.example", None) is None
    policy = HostPolicy("a.example", min_delay_ms=2000, blocked=True, updated_at=5.0)
    assert HostPolicy.from_cells("a.example", policy.to_cells()) == policy


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_json_cell_is_exactly_json_dumps(value: object) -> None:
    assert json_cell(value) == json.dumps(value).encode()


url_states = st.builds(
    UrlState,
    url=text,
    first_seen_ms=st.none() | due,
    state=st.sampled_from(["queued", "fetched", "error", "refused"]),
    source=st.none() | text,
    depth=st.none() | st.integers(0, 50),
    status=st.none() | st.integers(100, 599),
    checksum=st.none() | text,
    revisit=st.none() | st.fixed_dictionaries({"visits": st.integers(0, 9)}),
)


@settings(max_examples=150, deadline=None)
@given(url_states)
def test_a_seen_set_row_comes_back_equal(state: UrlState) -> None:
    assert UrlState.from_cells(state.to_cells()) == state


def test_a_fields_own_cell_wins_over_the_discovery_cell() -> None:
    """Discovery writes one packed cell; a later fetch writes single fields over it, unread."""
    cells = UrlState.discovered_cells("http://a.example/", 100, "link", 2)
    assert set(cells) == {QUEUED_CELL}
    found = UrlState.from_cells(cells)
    assert (found.url, found.first_seen_ms, found.source, found.depth, found.state) == (
        "http://a.example/",
        100,
        "link",
        2,
        "queued",
    )
    fetched = UrlState("http://a.example/", state="fetched", status=200, depth=1)
    cells.update(fetched.to_cells(only=("state", "status", "depth")))
    merged = UrlState.from_cells(cells)
    assert (merged.state, merged.status, merged.depth, merged.first_seen_ms) == ("fetched", 200, 1, 100)


def test_cells_of_other_families_are_ignored_by_the_seen_set() -> None:
    cells = UrlState("http://a.example/").to_cells() | {"r:json": b"{}", "u:unknown_field": b"1"}
    assert UrlState.from_cells(cells) == UrlState("http://a.example/")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c:8080", "d"]), u64), max_size=30))
def test_due_work_is_grouped_per_host_in_order_of_first_appearance(rows: list[tuple[str, int]]) -> None:
    batch = [FrontierEntry(url=f"http://{h}/{fp}", fp=fp, host=h, due_ms=0) for h, fp in rows]
    grouped = list(packed_by_host(batch))
    assert [h for h, _ in grouped] == list(dict.fromkeys(h for h, _ in rows))
    for host, group in grouped:
        assert list(group) == [e for e in batch if e.host == host]


def test_host_refusals_round_trip_through_both_stores_and_old_rows_have_none(both_stores: str) -> None:
    """A host record's refusals (core/policy/refusals.py) are stored and read back by each
    backend as written; a row written before the field existed reads as no refusal."""
    from beamcrawl.core.policy import refusals
    from beamcrawl.stores.base import Mutation, open_store

    stored = refusals.note([], "status", refusals.Identity("beamcrawl", key="kid"), {"status": 403, "url": "u"}, 5.0)
    stored = refusals.note(
        stored, "token", refusals.Identity("beamcrawl"), {"lines": ["1: User-agent: beamcrawl"]}, 6.0
    )
    record = HostRecord("a.example:8080", delay=2.0, refusals=stored)
    old = json.loads(HostRecord("b.example").to_cells()[JSON_CELL])
    del old["refusals"]
    with open_store(both_stores) as store:
        store.mutate(
            "hosts",
            [
                Mutation.set(b"a.example:8080", record.to_cells()),
                Mutation.set(b"b.example", {JSON_CELL: json.dumps(old).encode()}),
            ],
        )
        rows = store.read_keys("hosts", [b"a.example:8080", b"b.example"])
    back = HostRecord.from_cells("a.example:8080", rows[b"a.example:8080"])
    assert back == record and [r.kind for r in refusals.load(back.refusals)] == ["status", "token"]
    assert HostRecord.from_cells("b.example", rows[b"b.example"]).refusals == []
