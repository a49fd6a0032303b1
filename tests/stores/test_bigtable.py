"""Tests specific to the Bigtable store, against the real emulator (never a mock).

The contract suite (test_store_contract.py) covers the interface; these cover what only
Bigtable has: URIs and table names, table and family creation, versions and the filters
that hide them, the write path's folding and retries, and the emulator helper itself.
"""

from __future__ import annotations

import os
import pickle
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as api_exceptions
from google.cloud.bigtable.data import ReadRowsQuery, SetCell
from google.cloud.bigtable_v2.types import MutateRowsResponse

from beamcrawl.cli import store_admin
from beamcrawl.stores import emulator
from beamcrawl.stores.base import FAMILIES, TABLES, Mutation, StoreError, open_store
from beamcrawl.stores.bigtable import BigtableStore, fold_mutations, parse_uri
from beamcrawl.stores.emulator import scratch_store

# Admin calls made directly by these tests announce the emulator on every client.
pytestmark = pytest.mark.filterwarnings("ignore:Connecting to Bigtable emulator:RuntimeWarning")


# --- URIs ----------------------------------------------------------------------------------


def test_parse_uri() -> None:
    assert parse_uri("bigtable://p/i") == ("p", "i", "")
    assert parse_uri("bigtable://p/i/crawl-7") == ("p", "i", "crawl-7")
    assert parse_uri("bigtable://p/i/crawl_7/") == ("p", "i", "crawl_7")
    for bad in ("bigtable://p", "bigtable://p//x", "bigtable://p/i/a/b", "bigtable:///i", "bt://p/i"):
        with pytest.raises(StoreError, match="PROJECT/INSTANCE"):
            parse_uri(bad)
    with pytest.raises(StoreError, match="prefix"):
        parse_uri("bigtable://p/i/bad prefix")
    with pytest.raises(StoreError, match="prefix"):
        parse_uri("bigtable://p/i/" + "x" * 45)


def test_table_ids() -> None:
    assert BigtableStore("p", "i", "c1").table_id("urls") == "c1_urls"
    assert BigtableStore("p", "i").table_id("frontier") == "frontier"
    assert BigtableStore("p", "i", "c1").uri == "bigtable://p/i/c1"
    with pytest.raises(ValueError, match="nope"):
        BigtableStore("p", "i").table_id("nope")


def test_open_store_dispatches_on_the_scheme(bigtable_uri: str) -> None:
    with open_store(bigtable_uri) as store:
        assert isinstance(store, BigtableStore) and store.uri == bigtable_uri


# --- tables and families -------------------------------------------------------------------


def _families(store: BigtableStore, table: str) -> dict[str, Any]:
    admin = store._admin_table(table)
    return {name: family.gc_rule for name, family in admin.list_column_families().items()}


def test_uninitialised_store_fails_with_the_command_that_fixes_it(bigtable_emulator: Any) -> None:
    with scratch_store(init=False) as uri:
        with pytest.raises(StoreError) as exc:
            open_store(uri)
        message = str(exc.value)
        assert "\n" not in message
        assert f"beamcrawl store init --store {uri}" in message
        # Unchecked (a worker's lazy copy): the first read says the same.
        store = BigtableStore.from_uri(uri, check=False)
        with pytest.raises(StoreError, match="store init"):
            list(store.read_range("urls"))
        store.close()


def test_init_creates_tables_and_families_once(bigtable_emulator: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with scratch_store(init=False) as uri:
        assert store_admin.main(["init", "--store", uri]) == 0
        assert "created" in capsys.readouterr().out
        store = BigtableStore.from_uri(uri)
        for table in TABLES:
            rules = _families(store, table)
            assert set(rules) == set(FAMILIES)
            assert all(rule.max_num_versions == 1 for rule in rules.values())  # a set overwrites
        # Idempotent, and it adds a family declared since the tables were made.
        store._admin_table("hosts").column_family("r").delete()
        assert store_admin.main(["init", "--store", uri]) == 0
        assert f"{store.table_id('hosts')}:r" in capsys.readouterr().out
        assert set(_families(store, "hosts")) == set(FAMILIES)
        assert store_admin.main(["info", "--store", uri]) == 0
        assert "urls" in capsys.readouterr().out
        store.close()


def test_an_undeclared_family_is_created_on_first_use(bigtable_uri: str) -> None:
    with open_store(bigtable_uri) as store:
        assert isinstance(store, BigtableStore)
        store.mutate("hosts", [Mutation.set(b"h", {"x:new": b"1"})])
        assert store.read_keys("hosts", [b"h"]) == {b"h": {"x:new": b"1"}}
        assert _families(store, "hosts")["x"].max_num_versions == 1


def test_writing_a_missing_family_says_how_to_fix_it(bigtable_uri: str) -> None:
    with open_store(bigtable_uri) as store:
        assert isinstance(store, BigtableStore)
        store._admin_table("meta").column_family("m").delete()  # an old init, say
        with pytest.raises(StoreError, match="store init"):
            store.mutate("meta", [Mutation.set(b"round", {"m:next": b"2"})])


# --- versions ------------------------------------------------------------------------------


def _versions(store: BigtableStore, table: str, key: bytes) -> list[tuple[str, int, bytes]]:
    """Every stored version of a row's cells, no filter (what GC has not removed yet)."""
    rows = store._table(table).read_rows(ReadRowsQuery(row_keys=[key]))
    return [(f"{c.family}:{c.qualifier.decode()}", c.timestamp_micros, c.value) for r in rows for c in r.cells]


def test_reads_see_the_newest_version_before_gc(bigtable_uri: str) -> None:
    with open_store(bigtable_uri) as store:
        assert isinstance(store, BigtableStore)
        store.mutate("urls", [Mutation.set(b"k", {"u:state": b"queued", "u:url": b"x"})])
        time.sleep(0.003)  # a later millisecond: a new version, not an overwrite
        store.mutate("urls", [Mutation.set(b"k", {"u:state": b"fetched"})])
        assert len([v for v in _versions(store, "urls", b"k") if v[0] == "u:state"]) == 2
        expected = {b"k": {"u:state": b"fetched", "u:url": b"x"}}
        assert store.read_keys("urls", [b"k"]) == expected
        assert list(store.read_range("urls")) == list(expected.items())


def test_same_millisecond_sets_overwrite(bigtable_uri: str) -> None:
    with open_store(bigtable_uri) as store:
        assert isinstance(store, BigtableStore)
        store._last_ms = time.time_ns() // 1_000_000 + 60_000  # pin the clock a minute ahead
        store.mutate("urls", [Mutation.set(b"k", {"u:a": b"1"})])
        store.mutate("urls", [Mutation.set(b"k", {"u:a": b"2"})])
        assert [v[2] for v in _versions(store, "urls", b"k")] == [b"2"]


def test_check_and_set_replaces_every_version(bigtable_uri: str) -> None:
    with open_store(bigtable_uri) as store:
        assert isinstance(store, BigtableStore)
        # A version from a clock far ahead (another machine's, say) holds the lease.
        future = (time.time_ns() // 1_000_000 + 3_600_000) * 1000
        store._table("meta").mutate_row(b"lease", [SetCell("m", b"lease", b"w1", future)])
        assert store.check_and_set("meta", b"lease", "m:lease", b"w1", b"w2")
        assert [v[2] for v in _versions(store, "meta", b"lease")] == [b"w2"]  # w1 is gone
        assert store.read_keys("meta", [b"lease"]) == {b"lease": {"m:lease": b"w2"}}
        assert not store.check_and_set("meta", b"lease", "m:lease", b"w1", b"w3")
        assert store.check_and_set("meta", b"lease", "m:lease", b"w2", None)
        assert _versions(store, "meta", b"lease") == []


def test_check_and_set_compares_exact_bytes(bigtable_uri: str) -> None:
    with open_store(bigtable_uri) as store:
        for value in (b"", b"\x00", b"\xff\xfe", b".*", b"a\nb"):
            store.mutate("meta", [Mutation.set(b"k", {"m:v": value})])
            for other in (b"", b"\x00", b"\xff\xfe", b".*", b"a\nb", b"a"):
                if other != value:
                    assert not store.check_and_set("meta", b"k", "m:v", other, b"x")
            assert store.check_and_set("meta", b"k", "m:v", value, b"done")


# --- the write path ------------------------------------------------------------------------


def test_fold_mutations_keeps_the_effect_of_the_order() -> None:
    d, s = Mutation.delete_row, Mutation.set
    plans = fold_mutations(
        [
            s(b"a", {"f:x": b"1", "f:y": b"1"}),
            d(b"a"),
            s(b"a", {"f:x": b"2"}),
            s(b"b", {"f:x": b"1"}),
            s(b"a", {"f:x": b"3"}),
        ]
    )
    assert plans == [(b"a", True, {"f:x": b"3"}), (b"b", False, {"f:x": b"1"})]
    assert fold_mutations([s(b"c", {"f:x": b"1"}), d(b"c")]) == [(b"c", True, {})]
    with pytest.raises(TypeError):
        fold_mutations(["not a mutation"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        fold_mutations([s(b"k", {"nofamily": b"1"})])


class _Flaky:
    """The real GAPIC client with faults injected in front: per-entry UNAVAILABLE for
    chosen attempts, or the stream breaking after its first response. Data still goes to
    the emulator; only failures the emulator cannot produce are made up."""

    def __init__(self, real: Any, plan: list[str]) -> None:
        self.real, self.plan, self.calls = real, plan, []

    def mutate_rows(self, request: Any, **kw: Any) -> Any:
        mode = self.plan.pop(0) if self.plan else "pass"
        self.calls.append(len(request.entries))
        if mode == "unavailable-odd":  # entries at odd positions fail, the rest pass
            keep = type(request)(table_name=request.table_name)
            keep.entries.extend(e for i, e in enumerate(request.entries) if i % 2 == 0)
            responses = list(self.real.mutate_rows(request=keep, **kw))
            for response in responses:
                pb = type(response).pb(response)
                for result in pb.entries:
                    result.index *= 2
                for i in range(1, len(request.entries), 2):
                    failed = pb.entries.add(index=i)
                    failed.status.code = 14
                    failed.status.message = "injected"
            yield from responses
        elif mode == "unavailable-all":
            out = MutateRowsResponse()
            for i in range(len(request.entries)):
                failed = MutateRowsResponse.pb(out).entries.add(index=i)
                failed.status.code = 14
            yield out
        elif mode == "break":
            first = type(request)(table_name=request.table_name)
            first.entries.extend(request.entries[:1])
            yield from self.real.mutate_rows(request=first, **kw)
            raise api_exceptions.ServiceUnavailable("injected: stream broke")
        elif mode == "invalid":  # every entry refused, permanently
            out = MutateRowsResponse()
            pb = MutateRowsResponse.pb(out)
            for i in range(len(request.entries)):
                failed = pb.entries.add(index=i)
                failed.status.code = 3
                failed.status.message = "injected: invalid"
            yield out
        else:
            yield from self.real.mutate_rows(request=request, **kw)


def _with_faults(store: BigtableStore, plan: list[str]) -> _Flaky:
    flaky = _Flaky(store._gapic(), plan)
    store._gapic = lambda: flaky  # type: ignore[method-assign]
    return flaky


def test_mutate_retries_entries_that_failed_transiently(bigtable_uri: str) -> None:
    with open_store(bigtable_uri) as store:
        assert isinstance(store, BigtableStore)
        flaky = _with_faults(store, ["unavailable-odd", "unavailable-odd", "pass"])
        rows = {b"%03d" % i: {"u:i": b"%d" % i} for i in range(20)}
        store.mutate("urls", [Mutation.set(k, c) for k, c in rows.items()])
        assert flaky.calls == [20, 10, 5]  # only what failed is sent again
        assert dict(store.read_range("urls")) == rows


def test_mutate_resends_what_a_broken_stream_did_not_report(bigtable_uri: str) -> None:
    with open_store(bigtable_uri) as store:
        assert isinstance(store, BigtableStore)
        flaky = _with_faults(store, ["break", "pass"])
        rows = {b"%03d" % i: {"u:i": b"%d" % i} for i in range(7)}
        store.mutate("urls", [Mutation.set(k, c) for k, c in rows.items()])
        assert flaky.calls == [7, 6]
        assert dict(store.read_range("urls")) == rows


def test_mutate_gives_up_on_permanent_errors_and_after_its_attempts(bigtable_uri: str) -> None:
    with open_store(bigtable_uri) as store:
        assert isinstance(store, BigtableStore)
        _with_faults(store, ["invalid"])
        with pytest.raises(StoreError, match="INVALID_ARGUMENT: injected"):
            store.mutate("urls", [Mutation.set(b"k", {"u:a": b"1"})])
        store.mutate_attempts = 3
        flaky = _with_faults(store, ["unavailable-all"] * 5)
        with pytest.raises(StoreError, match="4 row write.* still failing after 3 attempts"):
            store.mutate("urls", [Mutation.set(b"%d" % i, {"u:a": b"1"}) for i in range(4)])
        assert flaky.calls == [4, 4, 4]


# --- processes and sizes -------------------------------------------------------------------


def test_pickles_to_its_name_and_settings(bigtable_uri: str) -> None:
    with open_store(bigtable_uri) as store:
        assert isinstance(store, BigtableStore)
        store.write_batch = 17
        store.mutate("urls", [Mutation.set(b"k", {"u:a": b"1"})])  # connected now
        data = pickle.dumps(store)
        assert b"grpc" not in data.lower() and b"Channel" not in data
        copy = pickle.loads(data)
        assert copy.uri == store.uri and copy.write_batch == 17
        assert copy.read_keys("urls", [b"k"]) == {b"k": {"u:a": b"1"}}
        copy.close()


def test_estimate_rows_from_samples(bigtable_uri: str) -> None:
    import random
    import struct

    rng = random.Random(4)
    with open_store(bigtable_uri) as store:
        assert store.estimate_rows("urls") == 0
        store.mutate(
            "urls", [Mutation.set(struct.pack(">Q", rng.getrandbits(64)), {"u:url": b"x" * 40}) for _ in range(30_000)]
        )
        assert 27_000 <= store.estimate_rows("urls") <= 33_000
        store.mutate(
            "frontier",
            [Mutation.set(struct.pack(">QQ", 1_700_000_000_000 + i, i), {"r:json": b"{}"}) for i in range(25_000)],
        )
        assert 22_500 <= store.estimate_rows("frontier") <= 27_500  # keys not uniform: bytes work


def test_a_rounds_frontier_count_is_exact_when_small_and_estimated_when_large(bigtable_uri: str) -> None:
    """After every round the report gives the frontier left: counted while the table is small,
    from SampleRowKeys past that (an exact count streams every key to the client), and
    the report says which."""
    import struct

    from beamcrawl.stores.interface import ESTIMATE_EXACT_ROWS

    with open_store(bigtable_uri) as store:
        rows = lambda lo, hi: [  # noqa: E731
            Mutation.set(struct.pack(">QQ", 1_700_000_000_000 + i, i), {"r:json": b"{}"}) for i in range(lo, hi)
        ]
        store.mutate("frontier", rows(0, 1_000))
        assert store.report_rows("frontier") == (1_000, True)
        store.mutate("frontier", rows(1_000, ESTIMATE_EXACT_ROWS + 10_000))
        n, exact = store.report_rows("frontier")
        assert not exact and abs(n - (ESTIMATE_EXACT_ROWS + 10_000)) <= 0.1 * (ESTIMATE_EXACT_ROWS + 10_000)


# --- the emulator helper -------------------------------------------------------------------


def test_emulator_choice_by_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BEAMCRAWL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BEAMCRAWL_EMULATOR", "off")
    assert emulator.find_emulator() is None
    with pytest.raises(emulator.EmulatorUnavailable, match="disabled"):
        emulator.find_or_build_emulator()
    monkeypatch.setenv("BEAMCRAWL_EMULATOR", str(tmp_path / "missing"))
    with pytest.raises(emulator.EmulatorUnavailable, match="not an executable"):
        emulator.find_emulator()
    fake = tmp_path / "my-emulator"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("BEAMCRAWL_EMULATOR", str(fake))
    assert emulator.find_emulator() == fake
    # "build" skips the SDK's copy and uses the cache, building there without Go: fails clearly.
    monkeypatch.setenv("BEAMCRAWL_EMULATOR", "build")
    assert emulator.find_emulator() is None
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(emulator.EmulatorUnavailable, match="no Go toolchain"):
        emulator.find_or_build_emulator()
    cached = emulator.cached_binary()
    assert cached.parent == tmp_path / "cache" / "bin" and emulator.GO_MODULE_VERSION in cached.name


def test_an_emulator_whose_port_another_process_holds_is_not_mistaken_for_it(bigtable_emulator: Any) -> None:
    """The port asked for is taken: the emulator cannot bind it, and the process that holds it
    (taking connections) must not be handed out as the emulator."""
    with socket.socket() as occupant:
        occupant.bind(("127.0.0.1", 0))
        occupant.listen()
        taken = occupant.getsockname()[1]
        with pytest.raises(emulator.EmulatorUnavailable, match="did not start"):
            with emulator.running_emulator(bigtable_emulator.binary, port=taken, set_env=False):
                pytest.fail(f"port {taken} is another process's")


def _fake_emulator(tmp_path: Path, says: str) -> Path:
    binary = tmp_path / "cbtemulator"
    binary.write_text(f"#!/bin/sh\necho '{says}'\nexec sleep 60\n")
    binary.chmod(0o755)
    return binary


def test_an_emulator_that_says_a_port_it_does_not_serve_fails_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(emulator, "START_TIMEOUT_S", 2.0)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        nobody = probe.getsockname()[1]  # nothing listens here
    cases = [
        (f"Cloud Bigtable emulator running on 127.0.0.1:{nobody}", f"said it runs on port {nobody}"),
        ("starting up", "did not say it listens"),
    ]
    for says, error in cases:
        with pytest.raises(emulator.EmulatorUnavailable, match=error) as exc:
            with emulator.running_emulator(_fake_emulator(tmp_path, says), set_env=False):
                pytest.fail("an emulator that does not serve must not be used")
        assert "\n" not in str(exc.value)


def test_running_emulator_sets_and_restores_the_environment(bigtable_emulator: Any) -> None:
    outer = os.environ["BIGTABLE_EMULATOR_HOST"]
    with emulator.running_emulator(bigtable_emulator.binary) as second:
        assert os.environ["BIGTABLE_EMULATOR_HOST"] == second.host != outer
        assert second.start_seconds > 0
    assert os.environ["BIGTABLE_EMULATOR_HOST"] == outer
    with pytest.raises(ProcessLookupError):
        for _ in range(100):  # stopped: its pid goes away
            os.kill(second.pid, 0)
            time.sleep(0.05)


def test_split_keys_make_parts_of_about_the_size_asked_from_the_samples(bigtable_uri: str) -> None:
    """The split is read off SampleRowKeys, whose offsets count bytes as the server does:
    bytes a row are taken from the rows before the first sample, so parts come out near the
    size asked (every part but the last within a quarter of it either way; the rows' own
    cell sizes, not checked against the samples, gave parts a third too large)."""
    import struct

    with open_store(bigtable_uri) as store:
        for start in range(0, 150_000, 25_000):
            rows = range(start, start + 25_000)
            store.mutate(
                "frontier", [Mutation.set(struct.pack(">QQ", 10**12 + i, i), {"r:json": b"x" * 90}) for i in rows]
            )
        end = struct.pack(">QQ", 10**12 + 120_000, 0)
        splits = store.split_keys("frontier", b"", end, 20_000)
        bounds = [b"", *splits, end]
        sizes = [
            sum(1 for _ in store.read_range("frontier", lo, hi, keys_only=True)) for lo, hi in zip(bounds, bounds[1:])
        ]
    assert sum(sizes) == 120_000
    assert len(sizes) >= 4
    assert all(15_000 <= n <= 25_000 for n in sizes[:-1]), sizes
