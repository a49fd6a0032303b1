"""The store contract: every backend must pass this suite (see conftest.py ``store``).

Each test gets a fresh, empty store. Tests use only the interface in
``beamcrawl.stores.base`` (plus ``open_store`` for reopening), never a backend's internals.
"""

from __future__ import annotations

import multiprocessing
import random
import struct
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_workers import worker_key, write_rows

from beamcrawl.stores.base import TABLES, Mutation, Store, open_store


def _rows(it: Iterator[tuple[bytes, dict[str, bytes]]]) -> list[tuple[bytes, dict[str, bytes]]]:
    return list(it)


def _keys(store: Store, table: str = "urls", **kw: object) -> list[bytes]:
    return [k for k, _ in store.read_range(table, **kw)]  # type: ignore[arg-type]


def _put(store: Store, keys: list[bytes], table: str = "urls") -> None:
    store.mutate(table, [Mutation.set(k, {"f:k": k}) for k in keys])


# --- writes -----------------------------------------------------------------------------


def test_set_merges_cells(store: Store) -> None:
    store.mutate("urls", [Mutation.set(b"k", {"f:a": b"1", "f:b": b"2"})])
    store.mutate("urls", [Mutation.set(b"k", {"f:b": b"3", "g:c": b"4"})])
    assert _rows(store.read_range("urls")) == [(b"k", {"f:a": b"1", "f:b": b"3", "g:c": b"4"})]


def test_empty_value_is_a_value(store: Store) -> None:
    store.mutate("urls", [Mutation.set(b"k", {"f:a": b""})])
    assert store.read_keys("urls", [b"k"]) == {b"k": {"f:a": b""}}


def test_tables_are_separate(store: Store) -> None:
    for table in TABLES:
        store.mutate(table, [Mutation.set(b"k", {"f:t": table.encode()})])
    for table in TABLES:
        assert _rows(store.read_range(table)) == [(b"k", {"f:t": table.encode()})]


def test_delete_row_then_set(store: Store) -> None:
    store.mutate("urls", [Mutation.set(b"k", {"f:a": b"1", "f:b": b"2"})])
    store.mutate("urls", [Mutation(key=b"k", cells={"f:c": b"3"}, delete=True)])
    assert _rows(store.read_range("urls")) == [(b"k", {"f:c": b"3"})]
    store.mutate("urls", [Mutation.delete_row(b"k"), Mutation.delete_row(b"absent")])
    assert _rows(store.read_range("urls")) == []


def test_mutations_apply_in_order_within_a_batch(store: Store) -> None:
    store.mutate(
        "urls",
        [
            Mutation.set(b"a", {"f:x": b"1", "f:y": b"1"}),
            Mutation.delete_row(b"a"),
            Mutation.set(b"a", {"f:x": b"2"}),
            Mutation.set(b"a", {"f:x": b"3"}),
            Mutation.set(b"b", {"f:x": b"1"}),
            Mutation.delete_row(b"b"),
            Mutation.set(b"c", {"f:x": b"1"}),
            Mutation.delete_row(b"c"),
            Mutation.set(b"c", {"f:z": b"9"}),
            Mutation.delete_row(b"c"),
        ],
    )
    assert _rows(store.read_range("urls")) == [(b"a", {"f:x": b"3"})]


def test_mutate_accepts_a_generator(store: Store) -> None:
    store.mutate("urls", (Mutation.set(b"%04d" % i, {"f:i": b"x"}) for i in range(50)))
    assert len(_keys(store)) == 50


# --- range reads ------------------------------------------------------------------------


def test_read_range_bounds(store: Store) -> None:
    keys = [b"k%d" % i for i in range(10)]
    _put(store, keys)
    assert _keys(store) == keys
    assert _keys(store, start=b"k3") == keys[3:]  # start is inclusive
    assert _keys(store, end=b"k3") == keys[:3]  # end is exclusive
    assert _keys(store, start=b"k3", end=b"k7") == keys[3:7]
    assert _keys(store, start=b"k35", end=b"k65") == keys[4:7]  # bounds between keys
    assert _keys(store, start=b"k5", end=b"k5") == []
    assert _keys(store, start=b"k7", end=b"k3") == []
    assert _keys(store, start=b"z") == []
    assert _keys(store, end=b"a") == []


def test_read_range_orders_keys_as_unsigned_bytes(store: Store) -> None:
    keys = [
        b"\x00",
        b"\x00\x00",
        b"\x01\xff",
        b"a",
        b"ab",
        b"ab\x00",
        b"abc",
        b"\x7f",
        b"\x7f\xff",
        b"\x80",
        b"\x80\x00",
        b"\xc3\xa9",
        b"\xfe\xff\xff",
        b"\xff",
        b"\xff\x00",
        b"\xff\xff\xff\xff",
    ]
    shuffled = keys[:]
    random.Random(1).shuffle(shuffled)
    _put(store, shuffled)
    assert _keys(store) == sorted(keys)  # Python compares bytes as unsigned, like memcmp
    assert _keys(store, start=b"\x80") == sorted(k for k in keys if k >= b"\x80")
    assert _keys(store, start=b"\x7f", end=b"\xff") == [
        b"\x7f",
        b"\x7f\xff",
        b"\x80",
        b"\x80\x00",
        b"\xc3\xa9",
        b"\xfe\xff\xff",
    ]
    assert _keys(store, start=b"ab", end=b"abc") == [b"ab", b"ab\x00"]  # prefixes
    assert _keys(store, start=b"\xff") == [b"\xff", b"\xff\x00", b"\xff\xff\xff\xff"]


def test_read_range_fingerprint_keys(store: Store) -> None:
    # 8-byte big-endian fingerprints: a bucket is a contiguous key range.
    rng = random.Random(3)
    fps = sorted({struct.pack(">Q", rng.getrandbits(64)) for _ in range(500)})
    _put(store, fps)
    lo, hi = struct.pack(">Q", 1 << 63), struct.pack(">Q", 3 << 62)
    assert _keys(store, start=lo, end=hi) == [k for k in fps if lo <= k < hi]


def test_keys_only_returns_empty_cells(store: Store) -> None:
    store.mutate(
        "urls",
        [Mutation.set(b"a", {"f:x": b"1", "f:y": b"2"}), Mutation.set(b"b", {"f:x": b"3"})],
    )
    assert _rows(store.read_range("urls", keys_only=True)) == [(b"a", {}), (b"b", {})]
    assert store.read_keys("urls", [b"a", b"b", b"c"], keys_only=True) == {b"a": {}, b"b": {}}


def test_limit_counts_rows(store: Store) -> None:
    store.mutate(
        "urls",
        [Mutation.set(b"k%d" % i, {"f:a": b"1", "f:b": b"2", "f:c": b"3"}) for i in range(6)],
    )
    rows = _rows(store.read_range("urls", limit=4))
    assert [k for k, _ in rows] == [b"k0", b"k1", b"k2", b"k3"]
    assert all(len(cells) == 3 for _, cells in rows)
    assert _keys(store, keys_only=True, limit=2) == [b"k0", b"k1"]
    assert _keys(store, start=b"k4", limit=5) == [b"k4", b"k5"]
    assert _keys(store, limit=100) == [b"k%d" % i for i in range(6)]
    assert _keys(store, limit=0) == []


def test_long_scan_streams_every_row(store: Store) -> None:
    # Enough rows, of uneven width, to cross any internal chunk boundaries.
    expected = []
    for i in range(3000):
        cells = {f"f:{j}": b"v%d" % j for j in range(i % 5 + 1)}
        expected.append((struct.pack(">I", i * 7919 % 3000), cells))
    store.mutate("urls", [Mutation.set(k, c) for k, c in expected])
    expected.sort()
    assert _rows(store.read_range("urls")) == expected
    assert _keys(store, keys_only=True) == [k for k, _ in expected]
    assert _rows(store.read_range("urls", limit=1234)) == expected[:1234]


# --- key-set reads ----------------------------------------------------------------------


def test_read_keys_missing_and_duplicates(store: Store) -> None:
    store.mutate(
        "urls",
        [Mutation.set(b"a", {"f:x": b"1"}), Mutation.set(b"\xff", {"f:x": b"2", "f:y": b"3"})],
    )
    got = store.read_keys("urls", [b"a", b"missing", b"a", b"\xff", b"\xff", b"zz"])
    assert got == {b"a": {"f:x": b"1"}, b"\xff": {"f:x": b"2", "f:y": b"3"}}
    assert store.read_keys("urls", []) == {}
    assert store.read_keys("urls", iter([b"a"])) == {b"a": {"f:x": b"1"}}


def test_read_keys_many(store: Store) -> None:
    rng = random.Random(5)
    stored = [struct.pack(">Q", rng.getrandbits(64)) for _ in range(5000)]
    _put(store, stored)
    absent = [struct.pack(">Q", rng.getrandbits(64)) for _ in range(5000)]
    got = store.read_keys("urls", stored + absent)
    assert got == {k: {"f:k": k} for k in stored}


# --- check-and-set ----------------------------------------------------------------------


def test_check_and_set(store: Store) -> None:
    cas = store.check_and_set
    assert cas("meta", b"lease", "m:owner", None, b"w1") is True  # absent -> set
    assert cas("meta", b"lease", "m:owner", None, b"w2") is False  # second contender
    assert cas("meta", b"lease", "m:owner", b"w2", b"w3") is False  # expected mismatch
    assert store.read_keys("meta", [b"lease"]) == {b"lease": {"m:owner": b"w1"}}
    assert cas("meta", b"lease", "m:owner", b"w1", b"w2") is True  # holder hands over
    store.mutate("meta", [Mutation.set(b"lease", {"m:since": b"7"})])
    assert cas("meta", b"lease", "m:owner", b"w2", None) is True  # release deletes the cell
    assert store.read_keys("meta", [b"lease"]) == {b"lease": {"m:since": b"7"}}
    assert cas("meta", b"lease", "m:owner", b"w2", None) is False  # already gone
    assert cas("meta", b"lease", "m:owner", None, b"w4") is True  # free again
    assert cas("meta", b"lease", "m:owner", b"", b"w5") is False  # empty is not absent


def test_check_and_set_empty_value_and_absent_cell(store: Store) -> None:
    store.mutate("meta", [Mutation.set(b"k", {"m:v": b""})])
    assert store.check_and_set("meta", b"k", "m:v", None, b"x") is False  # present, if empty
    assert store.check_and_set("meta", b"k", "m:v", b"", b"x") is True
    assert store.check_and_set("meta", b"k", "m:w", None, None) is True  # absent stays absent
    assert store.read_keys("meta", [b"k"]) == {b"k": {"m:v": b"x"}}
    assert store.check_and_set("meta", b"k", "m:v", b"x", None) is True
    assert store.read_keys("meta", [b"k"]) == {}  # its last cell gone, the row is gone


def test_check_and_set_leaves_other_rows_alone(store: Store) -> None:
    store.mutate("meta", [Mutation.set(b"round", {"m:n": b"1"})])
    assert store.check_and_set("meta", b"lease", "m:owner", None, b"w1")
    assert _rows(store.read_range("meta")) == [
        (b"lease", {"m:owner": b"w1"}),
        (b"round", {"m:n": b"1"}),
    ]


# --- size estimates ---------------------------------------------------------------------


def test_estimate_rows_counts_small_tables(store: Store) -> None:
    assert store.estimate_rows("urls") == 0
    rng = random.Random(8)
    _put(store, [struct.pack(">Q", rng.getrandbits(64)) for _ in range(700)])
    store.mutate("frontier", [Mutation.set(struct.pack(">QQ", 10**12 + i, i), {"r:json": b"{}"}) for i in range(30)])
    assert store.estimate_rows("urls") == 700
    assert store.estimate_rows("frontier") == 30
    with pytest.raises(ValueError, match="nope"):
        store.estimate_rows("nope")


def test_count_rows_counts_rows_not_cells(store: Store) -> None:
    assert store.count_rows("frontier") == 0
    store.mutate("frontier", [Mutation.set(b"%03d" % i, {"r:json": b"{}", "r:clock": b"1"}) for i in range(250)])
    store.mutate("frontier", [Mutation.delete_row(b"%03d" % i) for i in range(0, 250, 5)])
    store.mutate("urls", [Mutation.set(b"k", {"u:q": b"1"})])  # another table's rows are not counted
    assert store.count_rows("frontier") == 200 == len(_keys(store, "frontier", keys_only=True))
    assert store.report_rows("frontier") == (200, True)  # a small table: every store counts it
    with pytest.raises(ValueError, match="nope"):
        store.count_rows("nope")
    with pytest.raises(ValueError, match="nope"):
        store.report_rows("nope")


# --- split keys -------------------------------------------------------------------------


def _parts(store: Store, table: str, start: bytes, end: bytes, splits: list[bytes]) -> list[list[bytes]]:
    bounds = [start, *splits, end]
    return [_keys(store, table, start=lo, end=hi, keys_only=True) for lo, hi in zip(bounds, bounds[1:])]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keys=st.sets(st.binary(min_size=1, max_size=3), max_size=60),
    bounds=st.tuples(st.binary(max_size=2), st.binary(max_size=2)),
    rows_per_part=st.integers(min_value=1, max_value=9),
)
def test_split_keys_cut_a_range_into_parts_that_hold_each_row_once(
    store: Store, keys: set[bytes], bounds: tuple[bytes, bytes], rows_per_part: int
) -> None:
    """Whatever the keys, the bounds (an empty end: no end) and the part size, the split keys
    are sorted, strictly inside the range, and the parts they make hold every row of the
    range exactly once, in order."""
    store.mutate("frontier", [Mutation.delete_row(k) for k in _keys(store, "frontier", keys_only=True)])
    store.mutate("frontier", [Mutation.set(k, {"r:json": b"{}"}) for k in keys])
    start, end = sorted(bounds) if all(bounds) else bounds
    splits = store.split_keys("frontier", start, end, rows_per_part)
    assert splits == sorted(set(splits))
    assert all(start < k and (not end or k < end) for k in splits)
    in_range = [k for k in sorted(keys) if start <= k and (not end or k < end)]
    parts = _parts(store, "frontier", start, end, splits)
    assert [k for part in parts for k in part] == in_range
    if len(in_range) <= rows_per_part:
        assert splits == []


def test_split_keys_of_a_deep_range_give_several_parts(store: Store) -> None:
    """2,000 due rows of a realistic size in parts of 300: several parts on every store (the
    embedded store exactly 300 rows a part, Bigtable about that, from its samples), none of
    the rows due later in any part."""
    due = [struct.pack(">QQ", 10**12 + i, i) for i in range(2_000)]
    later = [struct.pack(">QQ", 2 * 10**12 + i, i) for i in range(500)]
    store.mutate("frontier", [Mutation.set(k, {"r:json": b"x" * 120}) for k in due + later])
    end = struct.pack(">QQ", 10**12 + 2_000, 0)
    splits = store.split_keys("frontier", b"", end, 300)
    parts = _parts(store, "frontier", b"", end, splits)
    assert [k for part in parts for k in part] == due
    assert 3 <= len(parts) <= 20
    with pytest.raises(ValueError, match="rows_per_part"):
        store.split_keys("frontier", b"", end, 0)
    with pytest.raises(ValueError, match="nope"):
        store.split_keys("nope", b"", end, 10)


# --- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cells, error",
    [
        ([(b"", "f:a", b"1")], ValueError),
        ([(b"k", "fa", b"1")], ValueError),
        ([(b"k", ":a", b"1")], ValueError),
        ([(b"k", "f:a", b"1"), (b"l", "g", b"1")], ValueError),
        (["k", "f:a", b"1"], TypeError),
        ([("k", "f:a", b"1")], TypeError),
        ([(b"k", 7, b"1")], TypeError),
        ([(b"k", "f:a", "1")], TypeError),
        ([(b"k", "f:a", None)], TypeError),
        ([(b"k", "f:a")], TypeError),
        ([(b"k", "f:a", b"1", b"2")], TypeError),
    ],
)
def test_write_cells_refuses_what_mutate_refuses_and_writes_nothing_of_the_batch(store: Store, cells, error) -> None:
    with pytest.raises(error):
        store.write_cells("urls", cells)
    assert _rows(store.read_range("urls")) == []
    with pytest.raises(ValueError, match="nope"):
        store.write_cells("nope", [(b"k", "f:a", b"1")])


def test_write_cells_takes_bytes_like_keys_and_values(store: Store) -> None:
    store.write_cells("urls", [(bytearray(b"k"), "f:a", memoryview(b"v")), (b"j", "f:a", b"w")])  # type: ignore[list-item]
    assert _rows(store.read_range("urls")) == [(b"j", {"f:a": b"w"}), (b"k", {"f:a": b"v"})]


def test_unknown_table(store: Store) -> None:
    with pytest.raises(ValueError, match="nope"):
        list(store.read_range("nope"))
    with pytest.raises(ValueError, match="nope"):
        store.read_keys("nope", [b"k"])
    with pytest.raises(ValueError, match="nope"):
        store.mutate("nope", [Mutation.set(b"k", {"f:a": b"1"})])
    with pytest.raises(ValueError, match="nope"):
        store.check_and_set("nope", b"k", "f:a", None, b"1")


# --- durability and concurrency ---------------------------------------------------------


def test_persists_across_reopen(store: Store) -> None:
    _put(store, [b"a", b"b"])
    store.mutate("hosts", [Mutation.set(b"example.com", {"h:delay": b"1.5"})])
    store.close()
    with open_store(store.uri) as again:
        assert _keys(again) == [b"a", b"b"]
        assert again.read_keys("hosts", [b"example.com"]) == {b"example.com": {"h:delay": b"1.5"}}
        again.mutate("urls", [Mutation.delete_row(b"a")])
    with open_store(store.uri) as third:
        assert _keys(third) == [b"b"]


def test_processes_write_concurrently(store: Store) -> None:
    workers, rows = 4, 1000
    # spawn, as Beam's multi-process workers do: the store crosses by pickling.
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(workers)
    results = ctx.Queue()
    procs = [ctx.Process(target=write_rows, args=(store, w, rows, 10, barrier, results)) for w in range(workers)]
    for p in procs:
        p.start()
    outcomes = dict(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    won = [outcomes[w] for w in range(workers)]
    assert sum(won) == 1  # exactly one process got the lease
    got = _rows(store.read_range("urls"))
    assert len(got) == workers * rows
    expected = sorted(
        (worker_key(w, i), {"u:w": str(w).encode(), "u:i": b"%d" % i}) for w in range(workers) for i in range(rows)
    )
    assert got == expected
    owner = store.read_keys("meta", [b"lease"])[b"lease"]["m:owner"]
    assert won[int(owner)] is True


# --- the store against a model ----------------------------------------------------------

_key_st = st.sampled_from([b"a", b"ab", b"b", b"\x80", b"\xff", b"\xff\x00"])
_cells_st = st.dictionaries(st.sampled_from(["f:x", "f:y", "g:z"]), st.binary(max_size=3), max_size=3)
_mutation_st = st.one_of(
    st.builds(Mutation.set, _key_st, _cells_st.filter(bool)),
    st.builds(Mutation.delete_row, _key_st),
    st.builds(Mutation, key=_key_st, cells=_cells_st, delete=st.just(True)),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    batches=st.lists(
        st.lists(_mutation_st, max_size=8)
        | st.lists(st.tuples(_key_st, st.sampled_from(["f:x", "f:y", "g:z"]), st.binary(max_size=3)), max_size=12),
        max_size=4,
    )
)
def test_matches_a_dict_model(store: Store, batches: list[list[Mutation] | list[tuple[bytes, str, bytes]]]) -> None:
    """Batches of mutations (``mutate``) and runs of cells (``write_cells``, in any order,
    a cell given twice among them) against a dict."""
    # Hypothesis reuses the store across examples: empty it first.
    store.mutate("urls", [Mutation.delete_row(k) for k in _keys(store, keys_only=True)])
    model: dict[bytes, dict[str, bytes]] = {}
    for batch in batches:
        if batch and isinstance(batch[0], tuple):
            store.write_cells("urls", batch)  # type: ignore[arg-type]
            for key, column, value in batch:  # type: ignore[misc]
                model.setdefault(key, {})[column] = value
            continue
        store.mutate("urls", batch)  # type: ignore[arg-type]
        for m in batch:
            assert isinstance(m, Mutation)
            if m.delete:
                model.pop(m.key, None)
            if m.cells:
                model.setdefault(m.key, {}).update(m.cells)
    expected = sorted(model.items())
    assert _rows(store.read_range("urls")) == expected
    assert store.read_keys("urls", list(model) + [b"zz"]) == model
    assert store.count_rows("urls") == len(model)  # rows, not cells
    lo, hi = b"ab", b"\xff"
    assert _rows(store.read_range("urls", lo, hi)) == [r for r in expected if lo <= r[0] < hi]
