"""transforms/store_join.py: a bucket's sorted keys against one table, by scan or key set."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.schemas.records import fp_key
from beamcrawl.stores.base import Mutation, open_store
from beamcrawl.transforms.store_join import StoreJoin, choose_path


def test_choose_path_by_cost():
    assert choose_path(10, stored_keys=5000, keyset_cost_ratio=4) == "keyset"
    assert choose_path(2000, stored_keys=5000, keyset_cost_ratio=4) == "scan"
    assert choose_path(100, stored_keys=5000, keyset_cost_ratio=32) == "keyset"
    assert choose_path(200, stored_keys=5000, keyset_cost_ratio=32) == "scan"


def _both_paths(store, stored: list[int], probes: list[int], keys_only: bool) -> None:
    keys = [fp_key(fp) for fp in sorted(set(probes))]
    span = (max(probes) - min(probes) + 1) / float(1 << 64)
    reads = {}
    for path in ("scan", "keyset"):
        join = StoreJoin("urls", "test", len(stored), 1.0, path, keys_only=keys_only)
        reads[path] = list(join.read(store, keys, span))
    wanted = {fp_key(fp) for fp in stored} & set(keys)
    for path, rows in reads.items():
        got = [key for key, _ in rows]
        assert got == sorted(got), path  # key order, both ways
        assert {key for key in got if key in set(keys)} == wanted, path
        assert all(keys[0] <= key <= keys[-1] for key in got), path  # nothing outside the span
        assert all(bool(cells) is not keys_only for _, cells in rows), path
    # The key set returns exactly the matches; the scan every stored row in the span.
    assert [key for key, _ in reads["keyset"]] == sorted(wanted)
    assert [key for key, _ in reads["scan"]] == sorted(k for k in map(fp_key, stored) if keys[0] <= k <= keys[-1])


def _fill(store, stored: list[int]) -> None:
    store.mutate("urls", [Mutation.set(fp_key(fp), {"u:state": b'"fetched"'}) for fp in stored])


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(0, (1 << 64) - 1), max_size=40, unique=True),
    st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=20),
    st.booleans(),
)
def test_scan_and_key_set_find_the_same_stored_keys(tmp_path_factory, stored, probes, keys_only):
    # Probes that are stored, and the extremes of the key space (the last key has no successor).
    probes = probes + stored[: len(stored) // 2]
    uri = f"sqlite:///{tmp_path_factory.mktemp('join')}/store.sqlite"
    with open_store(uri) as store:
        _fill(store, stored)
        _both_paths(store, stored, probes, keys_only)


def test_both_stores_join_alike(both_stores):
    rng = random.Random(7)
    stored = sorted({rng.getrandbits(64) for _ in range(300)} | {(1 << 64) - 1})
    probes = rng.sample(stored, 40) + [rng.getrandbits(64) for _ in range(40)] + [(1 << 64) - 1]
    with open_store(both_stores) as store:
        _fill(store, stored)
        _both_paths(store, stored, probes, keys_only=True)
        _both_paths(store, stored, probes, keys_only=False)


def test_key_chunks_give_what_read_gives_a_chunk_at_a_time(both_stores, monkeypatch):
    """``key_chunks`` (the array merge's read): the keys ``read`` finds, by either path; a
    scan's in key order and in lists of at most KEY_CHUNK, a key set's in one list."""
    from beamcrawl.transforms import store_join

    monkeypatch.setattr(store_join, "KEY_CHUNK", 7)
    rng = random.Random(11)
    stored = sorted({rng.getrandbits(64) for _ in range(120)})
    probes = sorted(set(rng.sample(stored, 20) + [rng.getrandbits(64) for _ in range(20)]))
    keys = [fp_key(fp) for fp in probes]
    span = (probes[-1] - probes[0] + 1) / float(1 << 64)
    with open_store(both_stores) as store:
        _fill(store, stored)
        for path in ("scan", "keyset"):
            join = StoreJoin("urls", "test_chunks", len(stored), 1.0, path, keys_only=True)
            want = [key for key, _ in join.read(store, keys, span)]
            chunks = list(join.key_chunks(store, keys, span))
            got = [key for chunk in chunks for key in chunk]
            if path == "scan":
                assert got == want and all(len(c) <= 7 for c in chunks) and len(chunks) > 1
            else:
                assert sorted(got) == want and len(chunks) == 1
