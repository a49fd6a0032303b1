"""state/quarantine.py: an element failing in two rounds is held until released (on each
store backend: the rows live in the ``meta`` table)."""

from __future__ import annotations

import math
import tracemalloc

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.state import quarantine
from beamcrawl.stores.base import open_store
from beamcrawl.state.parquet_export import quarantine_row
from beamcrawl.core.urls.urlnorm import fingerprint

URL = "http://a.test/x"


def _letter(stage="parse", url=URL, host="a.test", key=""):
    return {"stage": stage, "key": key, "url": url, "host": host, "exception": "ValueError", "message": "bad"}


def test_two_rounds_quarantine_and_a_release_ends_it(store):
    hostless = _letter(url="", host="", key="")  # names no element: counted, never held
    assert quarantine.book_failures(store, 1, [_letter(), _letter(stage="record"), hostless]) == []
    assert quarantine.book_failures(store, 1, [_letter()]) == []  # the same round again (a resumed commit)
    assert quarantine.quarantined_urls(store) == set()
    assert quarantine.book_failures(store, 2, [_letter(), _letter(url="", host="b.test:81")]) == [("url", URL)]
    assert quarantine.quarantined_urls(store) == {fingerprint(URL)}
    assert quarantine.quarantined_hosts(store, ["b.test:81"]) == set()  # one round only
    assert quarantine.book_failures(store, 3, [_letter(url="", host="b.test:81")]) == [("host", "b.test:81")]
    assert quarantine.quarantined_hosts(store, ["b.test:81", "c.test"]) == {"b.test:81"}
    listed = quarantine.list_quarantine(store, "a.test")
    assert [(q["kind"], q["id"], q["rounds"]) for q in listed] == [("url", URL, [1, 2])]
    rows = [quarantine_row(k, c) for k, c in store.read_range("meta")]
    assert {(r["kind"], r["id"], r["failed_rounds"]) for r in rows if r} == {("url", URL, 2), ("host", "b.test:81", 2)}
    assert [r["id"] for r in quarantine.release(store, "http://A.test/x")] == [URL]  # normalised
    assert [r["id"] for r in quarantine.release(store, "b.test:81")] == ["b.test:81"]
    assert quarantine.quarantined_urls(store) == set() and quarantine.release(store, URL) == []
    # Released, the count starts over: one more failure does not quarantine again.
    assert quarantine.book_failures(store, 4, [_letter()]) == []


def test_a_quarantined_host_is_planned_as_paused_without_end():
    policy = quarantine.quarantine_policy("a.test", None)
    assert policy.host == "a.test" and policy.pause_until == math.inf and not policy.blocked


def test_kept_fps_name_frontier_rows_and_urls():
    key = (123).to_bytes(8, "big") + (456).to_bytes(8, "big")
    kept = quarantine.kept_fps([_letter(key=key.hex(), url=""), _letter(key="a.test"), _letter(url="", host="h")])
    assert kept == {456, fingerprint(URL)}


_IDS = st.sampled_from(["a.test", "b.test:81", "c.test", "http://a.test/x", "http://a.test/y", "http://c.test/"])


def _any_letter(ident: str, stage: str, message: str) -> dict:
    if ident.startswith("http"):
        return _letter(stage=stage, url=ident, host=ident.split("/")[2]) | {"message": message}
    return _letter(stage=stage, url="", host=ident) | {"message": message}


@settings(max_examples=60, deadline=None)
@given(
    rounds=st.lists(
        st.lists(st.tuples(_IDS, st.sampled_from(["parse", "record"]), st.text(max_size=8)), max_size=12),
        min_size=1,
        max_size=4,
    ),
    chunk=st.integers(1, 5),
)
def test_booking_a_chunk_at_a_time_stores_what_booking_all_at_once_does(tmp_path_factory, rounds, chunk):
    """Whatever the letters and the chunk size, the rows booked and the elements quarantined
    are those of one booking of the whole round (each element's first letter counts)."""
    folder = tmp_path_factory.mktemp("book")
    stores = [open_store(f"sqlite:///{folder}/{name}.sqlite") for name in ("chunked", "whole")]
    try:
        for round_no, letters in enumerate(rounds, 1):
            letters = [_any_letter(*spec) for spec in letters]
            chunked = quarantine.book_failures(stores[0], round_no, iter(letters), chunk=chunk)
            whole = quarantine.book_failures(stores[1], round_no, letters, chunk=10_000)
            assert sorted(chunked) == sorted(whole)
        assert list(stores[0].read_range("meta")) == list(stores[1].read_range("meta"))
    finally:
        for s in stores:
            s.close()


def _write_letters(path: str, n: int, traceback_chars: int) -> None:
    rows = {
        "stage": ["parse"] * n,
        "key": [(i.to_bytes(8, "big") * 2).hex() for i in range(n)],
        "url": [f"http://h{i % 50}.test/p{i}" for i in range(n)],
        "host": [f"h{i % 50}.test" for i in range(n)],
        "exception": ["ValueError"] * n,
        "message": [f"bad page {i}" for i in range(n)],
        "traceback": ["x" * traceback_chars] * n,
    }
    pq.write_table(pa.table(rows), path, row_group_size=1_000)


def test_a_rounds_letters_are_read_a_batch_at_a_time_without_their_tracebacks(tmp_path):
    """20,000 letters with 2 KB tracebacks (40 MB as rows) are read as they come: every letter,
    in order, without the traceback column, and never more than a few batches held."""
    paths = [str(tmp_path / f"part-{i}.parquet") for i in range(2)]
    for path in paths:
        _write_letters(path, 10_000, 2_000)
    tracemalloc.start()
    try:
        count, last = 0, None
        for letter in quarantine.read_letters(paths, batch_rows=500):
            assert "traceback" not in letter
            last = letter
            count += 1
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 20_000 and last is not None and last["url"] == "http://h49.test/p9999"
    assert peak < 8_000_000, peak  # reading the files whole, with tracebacks: over 40 MB


def test_settling_a_rounds_letters_keeps_their_rows_and_books_them_in_one_read(tmp_path):
    path = str(tmp_path / "part-0.parquet")
    _write_letters(path, 2_500, 10)
    reads = []
    letters = quarantine.read_letters([path], batch_rows=100)

    def counted():
        for letter in letters:
            reads.append(1)
            yield letter

    with open_store(f"sqlite:///{tmp_path}/s.sqlite") as store:
        keep, newly = quarantine.settle_letters(store, 1, counted())
        assert keep == set(range(2_500)) and newly == []
        assert len(reads) == 2_500  # one pass over the letters for both
        assert len(quarantine.list_quarantine(store, only_quarantined=False)) == 2_500
        _keep, newly = quarantine.settle_letters(store, 2, quarantine.read_letters([path]))
        assert len(newly) == 2_500  # a second round's failures quarantine every URL
