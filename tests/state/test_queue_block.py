"""state/frontier.py queue_new_block: a bucket's new URLs queued from its columns write the very
rows, in the same order of tables, that queueing them as candidates writes."""

from __future__ import annotations

import math
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.policy.change_rate import importance
from beamcrawl.schemas import cell_columns
from beamcrawl.schemas.candidate_block import CandidateBlock
from beamcrawl.schemas.records import Candidate, FrontierEntry, UrlState, fp_key
from beamcrawl.state.frontier import QueuedUrls, block_priorities, queue_new_block, queue_new_urls
from beamcrawl.stores.embedded import EmbeddedStore

# Any text, lone surrogates included (such a block is queued as candidates), and URL-like
# ASCII, as normalised URLs are (the columns' path).
_ANY = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
_ASCII = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=40)
_URL = st.one_of(
    st.builds(lambda h, p: f"http://{h}/{p}", st.sampled_from(["a.test", "b.test:8080", "xn--bcher-kva.test"]), _ASCII),
    _ASCII,
)
_INT64 = st.integers(-(2**63), 2**63 - 1)


def _candidates(url: st.SearchStrategy[str], text: st.SearchStrategy[str]) -> st.SearchStrategy[Candidate]:
    return st.builds(
        Candidate,
        fp=st.integers(0, 2**64 - 1),
        url=url,
        host=st.one_of(st.sampled_from(["a.test", "b.test", ""]), text),
        depth=st.one_of(st.integers(0, 40), _INT64),  # past 32 bits: the JSON cell, as candidates
        priority=st.floats(),  # NaN and infinities too
        source=st.sampled_from(["link", "sitemap", "feed", "redirect", "seed", "submit", ""]),
        inlinks=_INT64,
        inlink_hosts=st.lists(st.integers(0, 2**32 - 1), max_size=5).map(tuple),
        kind=st.one_of(st.sampled_from(["page", "sitemap", "feed"]), text),
        hops=st.one_of(st.integers(0, 5), _INT64),
        lastmod=st.one_of(st.none(), st.floats(allow_nan=False)),
        robots_origin=st.one_of(st.none(), st.just(""), text),
    )


_PLAIN = _candidates(_URL, st.sampled_from(["x", "é", ""]))
_WILD = _candidates(st.one_of(_URL, _ANY), _ANY)


class _Log(EmbeddedStore):
    """An embedded store that also records the table of each write, in order."""

    def write_cells(self, table, cells):
        self.tables.append(table)
        super().write_cells(table, cells)


def _store(folder: str, name: str) -> _Log:
    store = _Log(Path(folder) / f"{name}.sqlite")
    store.tables = []
    return store


def _written(store: EmbeddedStore) -> dict[str, dict]:
    return {table: dict(store.read_range(table)) for table in ("frontier", "urls")}


def _both(cands: list[Candidate], rows: list[int], now_ms: int, reason: str = "") -> QueuedUrls | list:
    """Queues ``rows`` of the candidates' block both ways; asserts the same rows and writes."""
    block = CandidateBlock.from_candidates(cands)
    with tempfile.TemporaryDirectory() as folder:
        by_objects, by_columns = _store(folder, "objects"), _store(folder, "columns")
        entries = queue_new_urls(by_objects, block.to_candidates(rows), now_ms, reason)
        queued = queue_new_block(by_columns, block, np.array(rows, dtype=np.int64), now_ms, reason)
        assert _written(by_columns) == _written(by_objects)
        assert by_columns.tables == by_objects.tables  # batch by batch: frontier, then urls
        # The entries, made when read, are the candidates' own, in key order.
        assert [e.to_cells() for e in queued] == [e.to_cells() for e in sorted(entries, key=lambda e: e.fp)]
        assert len(queued) == len(entries)
        by_objects.close()
        by_columns.close()
    return queued


@settings(max_examples=150, deadline=None)
@given(st.lists(_PLAIN, max_size=20), st.data())
def test_rows_queued_from_columns_are_those_queued_as_candidates(cands, data):
    """Whatever the rows, and however many of them each gather cuts (``CUT_ROWS``)."""
    rows = data.draw(st.lists(st.integers(0, max(0, len(cands) - 1)), max_size=len(cands), unique=True))
    reason = data.draw(st.sampled_from(["", "submitted: r", "é"]))
    cut_rows = data.draw(st.sampled_from([1, 2, 3, 7, cell_columns.CUT_ROWS]))
    default, cell_columns.CUT_ROWS = cell_columns.CUT_ROWS, cut_rows
    try:
        queued = _both(cands, rows if cands else [], data.draw(st.integers(0, 2**62)), reason)
    finally:
        cell_columns.CUT_ROWS = default
    fits = all(
        -(2**31) <= cands[i].depth < 2**31 and -(2**31) <= cands[i].hops < 2**31 and cands[i].depth >= 0 for i in rows
    )
    if fits and cands:
        assert isinstance(queued, QueuedUrls)  # the columns' path was taken


@settings(max_examples=150, deadline=None)
@given(st.lists(_WILD, max_size=12), st.data())
def test_any_values_are_queued_as_candidates_would_be(cands, data):
    """Text that is not ASCII, lone surrogates, values past a field: the same rows (such a
    block is queued as candidates, writing JSON cells where the binary layout cannot hold
    a value)."""
    rows = data.draw(st.lists(st.integers(0, max(0, len(cands) - 1)), max_size=len(cands), unique=True))
    _both(cands, rows if cands else [], data.draw(st.integers(0, 2**62)), data.draw(st.sampled_from(["", "x"])))


@settings(max_examples=200, deadline=None)
@given(st.lists(_PLAIN, min_size=1, max_size=30))
def test_priorities_are_what_each_entry_gets(cands):
    block = CandidateBlock.from_candidates(cands)
    got = block_priorities(block).tolist()
    want = [max(c.priority, importance(len(c.inlink_hosts), c.source, c.depth)) for c in cands]
    for g, w in zip(got, want):
        assert (math.isnan(g) and math.isnan(w)) or g == w, (g, w)


def test_a_large_bucket_is_written_in_batches_queued_before_seen(tmp_path):
    cands = [
        Candidate(fp=f * 7919, url=f"http://h{f % 13}.test/p/{f}", host=f"h{f % 13}.test", depth=f % 5, priority=0.1)
        for f in range(1, 4500)
    ]
    block = CandidateBlock.from_candidates(cands)
    store = _store(str(tmp_path), "s")
    queued = queue_new_block(store, block, np.arange(len(cands)), now_ms=3)
    assert isinstance(queued, QueuedUrls) and len(queued) == 4499
    assert store.tables == ["frontier", "urls"] * 3  # never a URL seen before it is queued
    rows = dict(store.read_range("urls"))
    assert UrlState.from_cells(rows[fp_key(7919 * 4)]) == UrlState(
        url="http://h4.test/p/4", first_seen_ms=3, state="queued", source="link", depth=4
    )
    frontier = dict(store.read_range("frontier"))
    entry = FrontierEntry.from_cells(next(iter(frontier.values())))
    assert (entry.due_ms, entry.url) == (3, "http://h1.test/p/1")
    store.close()


@pytest.mark.parametrize("now_ms", [-1, 2**63 - 1, 2**63, 2**64])
def test_a_due_time_past_the_cell_or_the_key_fares_as_with_candidates(tmp_path, now_ms):
    """Past the cell's 63 bits the entry's cell is JSON; past the key's 64 (or below 0) the
    key does not pack: either way what the candidates' path does."""
    cands = [Candidate(fp=5, url="http://a.test/", host="a.test", depth=0, priority=0.5)]
    outcomes = []
    for name, queue in (
        ("objects", lambda store: queue_new_urls(store, cands, now_ms)),
        ("columns", lambda store: queue_new_block(store, CandidateBlock.from_candidates(cands), np.array([0]), now_ms)),
    ):
        store = _store(str(tmp_path), name)
        try:
            queue(store)
            outcomes.append(_written(store))
        except Exception as exc:  # noqa: BLE001 (compared below)
            outcomes.append(type(exc))
        store.close()
    assert outcomes[0] == outcomes[1]
    assert (outcomes[0] is struct.error) == (not 0 <= now_ms < 2**64)
