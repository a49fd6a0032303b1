"""Tests specific to the embedded (SQLite) store: opening, errors, internals, threads."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import pickle
import sqlite3
import threading
from pathlib import Path

import pytest

from beamcrawl.stores.base import TABLES, Mutation, StoreError, open_store
from beamcrawl.stores.embedded import APPLICATION_ID, SCHEMA_VERSION, EmbeddedStore, _plan, sqlite_memory_used


def _open(path: Path) -> EmbeddedStore:
    return EmbeddedStore.from_uri(str(path))


# --- from_uri ---------------------------------------------------------------------------


def test_sqlite_uri_absolute(tmp_path: Path) -> None:
    with EmbeddedStore.from_uri(f"sqlite://{tmp_path}/sub/crawl.sqlite") as s:
        assert s.path == str(tmp_path / "sub" / "crawl.sqlite")
        assert s.uri == f"sqlite://{tmp_path}/sub/crawl.sqlite"
    assert (tmp_path / "sub" / "crawl.sqlite").is_file()


def test_sqlite_uri_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with EmbeddedStore.from_uri("sqlite://rel/state.db") as s:
        assert s.path == str(tmp_path / "rel" / "state.db")
    with EmbeddedStore.from_uri("sqlite://reldir") as s:
        assert s.path == str(tmp_path / "reldir" / "store.sqlite")


def test_plain_directory_is_created(tmp_path: Path) -> None:
    with _open(tmp_path / "out" / "state") as s:
        assert s.path == str(tmp_path / "out" / "state" / "store.sqlite")
    assert (tmp_path / "out" / "state").is_dir()


def test_plain_file_paths(tmp_path: Path) -> None:
    with _open(tmp_path / "a.sqlite") as s:
        assert s.path == str(tmp_path / "a.sqlite")
    with _open(tmp_path / "b.db") as s:
        assert s.path == str(tmp_path / "b.db")
    # An existing directory is a directory whatever its name...
    (tmp_path / "dir.sqlite").mkdir()
    with _open(tmp_path / "dir.sqlite") as s:
        assert s.path == str(tmp_path / "dir.sqlite" / "store.sqlite")
    # ...and an existing file is a file, so a store's own uri always reopens it.
    EmbeddedStore(tmp_path / "noext").close()
    with _open(tmp_path / "noext") as s:
        assert s.path == str(tmp_path / "noext")


def test_uri_reopens_the_same_file(tmp_path: Path) -> None:
    with _open(tmp_path / "x") as s:
        s.mutate("urls", [Mutation.set(b"k", {"f:a": b"1"})])
    with open_store(s.uri) as again:
        assert isinstance(again, EmbeddedStore)
        assert again.path == s.path
        assert again.read_keys("urls", [b"k"]) == {b"k": {"f:a": b"1"}}


def test_schema_created_on_open(tmp_path: Path) -> None:
    with _open(tmp_path / "s.sqlite"):
        pass
    conn = sqlite3.connect(tmp_path / "s.sqlite")
    try:
        sql = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
        assert set(sql) == set(TABLES)
        for table in TABLES:
            assert "WITHOUT ROWID" in sql[table]
            assert "PRIMARY KEY (k, c)" in sql[table]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()


def test_blob_keys_compare_with_memcmp(tmp_path: Path) -> None:
    # The property read_range relies on, checked on SQLite itself.
    keys = [b"\xff", b"\x80", b"\x7f", b"a", b"ab", b"", b"\x00", b"a\xff", b"\x80\x00"]
    with _open(tmp_path / "s.sqlite") as s:
        with s._use() as conn:
            got = [
                r[0]
                for r in conn.execute(
                    "SELECT k FROM (SELECT ? AS k " + "UNION ALL SELECT ? " * (len(keys) - 1) + ") ORDER BY k",
                    keys,
                )
            ]
    assert got == sorted(keys)


# --- errors opening ---------------------------------------------------------------------


def _one_line(exc: pytest.ExceptionInfo[StoreError]) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("garbage", [b"hello", os.urandom(8192), b"SQLite format 3\x00" + b"\x01" * 200])
def test_corrupt_file(tmp_path: Path, garbage: bytes) -> None:
    path = tmp_path / "bad.sqlite"
    path.write_bytes(garbage)
    with pytest.raises(StoreError) as exc:
        _open(path)
    message = _one_line(exc)
    assert str(path) in message
    assert "not a SQLite database" in message or "corrupt" in message


def test_other_sqlite_database(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE people (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a beamcrawl store") as exc:
        _open(path)
    assert str(path) in _one_line(exc)


def test_newer_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _open(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        _open(path)


def test_unwritable_location(tmp_path: Path) -> None:
    # A regular file where a directory should be: fails even for root.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError) as exc:
        _open(blocker / "state")
    assert str(blocker / "state") in _one_line(exc)
    with pytest.raises(StoreError) as exc:
        _open(blocker / "state.sqlite")
    assert str(blocker / "state.sqlite") in _one_line(exc)


def _open_read_only_dir(parent: str) -> str:
    """Tries to open a store in a read-only folder; returns the error text ('' if none)."""
    ro = os.path.join(parent, "ro")
    os.mkdir(ro, 0o555)
    os.chmod(ro, 0o555)
    try:
        _open(Path(ro) / "store.sqlite").close()
    except StoreError as exc:
        return str(exc)
    return ""


def _as_nobody(parent: str, conn) -> None:  # runs in a child process
    os.setgid(65534)
    os.setuid(65534)  # root ignores file permissions, so drop to 'nobody' first
    conn.send(_open_read_only_dir(parent))


def test_read_only_directory(tmp_path: Path) -> None:
    parent = tempfile.mkdtemp(prefix="bc-ro-")
    os.chmod(parent, 0o777)
    try:
        if os.geteuid() == 0:
            ctx = multiprocessing.get_context("fork")
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_as_nobody, args=(parent, there))
            proc.start()
            message = here.recv()
            proc.join(timeout=30)
        else:
            message = _open_read_only_dir(parent)
        assert os.path.join(parent, "ro") in message
        assert "\n" not in message
    finally:
        os.chmod(os.path.join(parent, "ro"), 0o755)
        shutil.rmtree(parent, ignore_errors=True)


def test_unusable_uris() -> None:
    with pytest.raises(StoreError, match="no path"):
        EmbeddedStore.from_uri("sqlite://")
    with pytest.raises(StoreError, match="memory"):
        EmbeddedStore.from_uri("sqlite://:memory:")


# --- bad arguments ----------------------------------------------------------------------


def test_bad_mutations_fail_the_whole_batch(tmp_path: Path) -> None:
    with _open(tmp_path / "s.sqlite") as s:
        good = Mutation.set(b"ok", {"f:a": b"1"})
        with pytest.raises(TypeError):
            s.mutate("urls", [good, Mutation.set("str-key", {"f:a": b"1"})])  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="empty"):
            s.mutate("urls", [good, Mutation.set(b"", {"f:a": b"1"})])
        with pytest.raises(ValueError, match="family:qualifier"):
            s.mutate("urls", [good, Mutation.set(b"k", {"nofamily": b"1"})])
        with pytest.raises(TypeError):
            s.mutate("urls", [good, Mutation.set(b"k", {"f:a": "str"})])  # type: ignore[dict-item]
        assert list(s.read_range("urls")) == []
        with pytest.raises(ValueError):
            list(s.read_range("urls", limit=-1))
        with pytest.raises(TypeError):
            list(s.read_range("urls", start="a"))  # type: ignore[arg-type]
        # bytes-like values are accepted and read back as bytes
        s.mutate("urls", [Mutation.set(bytearray(b"k"), {"f:a": memoryview(b"v")})])  # type: ignore[arg-type,dict-item]
        assert s.read_keys("urls", [b"k"]) == {b"k": {"f:a": b"v"}}


# --- internals: batching and chunking ---------------------------------------------------


def test_plan_groups_deletes_and_sets() -> None:
    d, s = Mutation.delete_row, Mutation.set
    # The rewrite pattern (delete + set per row) becomes one phase.
    phases = _plan([d(b"b"), s(b"b", {"f:x": b"1"}), d(b"a"), s(b"a", {"f:x": b"2"})])
    assert phases == [([(b"a",), (b"b",)], [(b"a", "f:x", b"2"), (b"b", "f:x", b"1")])]
    # A delete after a set of the same key starts a new phase.
    phases = _plan([s(b"a", {"f:x": b"1"}), d(b"a"), s(b"a", {"f:x": b"2"})])
    assert phases == [([], [(b"a", "f:x", b"1")]), ([(b"a",)], [(b"a", "f:x", b"2")])]
    # Sets of one key keep their order through the sort.
    phases = _plan([s(b"b", {"f:x": b"1"}), s(b"a", {"f:x": b"1"}), s(b"b", {"f:x": b"2"})])
    assert phases == [([], [(b"a", "f:x", b"1"), (b"b", "f:x", b"1"), (b"b", "f:x", b"2")])]


def test_small_write_batches_keep_order(tmp_path: Path) -> None:
    with _open(tmp_path / "s.sqlite") as s:
        s.write_batch = 2
        s.mutate(
            "urls",
            [
                Mutation.set(b"a", {"f:x": b"1"}),
                Mutation.set(b"b", {"f:x": b"1"}),
                Mutation.delete_row(b"a"),
                Mutation.set(b"a", {"f:y": b"2"}),
                Mutation.delete_row(b"b"),
            ],
        )
        assert list(s.read_range("urls")) == [(b"a", {"f:y": b"2"})]


@pytest.mark.parametrize("chunk", [2, 3, 5, 7, 64])
def test_read_range_chunking(tmp_path: Path, chunk: int) -> None:
    widths = [1, 2, 9, 1, 3, 7, 2, 1, 12, 1]  # rows both narrower and wider than chunks
    expected = [(b"r%02d" % i, {f"f:{j:02d}": b"%d" % j for j in range(w)}) for i, w in enumerate(widths)]
    with _open(tmp_path / "s.sqlite") as s:
        s.mutate("urls", [Mutation.set(k, c) for k, c in expected])
        s.read_chunk = chunk
        assert list(s.read_range("urls")) == expected
        assert list(s.read_range("urls", keys_only=True)) == [(k, {}) for k, _ in expected]
        for limit in range(len(expected) + 1):
            assert list(s.read_range("urls", limit=limit)) == expected[:limit]
            assert [k for k, _ in s.read_range("urls", keys_only=True, limit=limit)] == [k for k, _ in expected[:limit]]
        assert list(s.read_range("urls", b"r02", b"r09")) == expected[2:9]


def test_read_range_does_not_hold_the_store(tmp_path: Path) -> None:
    # Writing between rows of a scan must not deadlock (no lock is held across yields).
    with _open(tmp_path / "s.sqlite") as s:
        s.read_chunk = 4
        s.mutate("urls", [Mutation.set(b"%03d" % i, {"f:a": b"1"}) for i in range(20)])
        for k, _ in s.read_range("urls"):
            s.mutate("hosts", [Mutation.set(k, {"h:seen": b"1"})])
        assert len(list(s.read_range("hosts"))) == 20


def test_read_keys_chunking(tmp_path: Path) -> None:
    with _open(tmp_path / "s.sqlite") as s:
        s.keys_chunk = 3
        s.mutate("urls", [Mutation.set(b"%03d" % i, {"f:a": b"%d" % i}) for i in range(0, 40, 2)])
        got = s.read_keys("urls", [b"%03d" % i for i in range(40)])
        assert got == {b"%03d" % i: {"f:a": b"%d" % i} for i in range(0, 40, 2)}


# --- pickling, forking, threads ---------------------------------------------------------


def test_pickle_reopens_lazily(tmp_path: Path) -> None:
    s = _open(tmp_path / "s.sqlite")
    s.read_chunk = 17
    s.mutate("urls", [Mutation.set(b"k", {"f:a": b"1"})])
    data = pickle.dumps(s)
    assert b"Connection" not in data
    copy = pickle.loads(data)
    assert copy.path == s.path and copy.uri == s.uri and copy.read_chunk == 17
    assert copy.read_keys("urls", [b"k"]) == {b"k": {"f:a": b"1"}}
    copy.close()
    s.close()


def test_lazy_reopen_does_not_create_a_new_store(tmp_path: Path) -> None:
    s = _open(tmp_path / "s.sqlite")
    copy = pickle.loads(pickle.dumps(s))
    s.close()
    for suffix in ("", "-wal", "-shm"):
        Path(s.path + suffix).unlink(missing_ok=True)
    with pytest.raises(StoreError, match="does not exist"):
        copy.read_keys("urls", [b"k"])
    assert not Path(s.path).exists()


def test_close_then_use_reopens(tmp_path: Path) -> None:
    s = _open(tmp_path / "s.sqlite")
    s.close()
    s.close()  # idempotent
    s.mutate("urls", [Mutation.set(b"k", {"f:a": b"1"})])
    assert s.read_keys("urls", [b"k"]) == {b"k": {"f:a": b"1"}}
    s.close()


def _forked_write(store: EmbeddedStore) -> None:
    store.mutate("urls", [Mutation.set(b"child", {"f:a": b"1"})])


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform")
def test_fork_after_open(tmp_path: Path) -> None:
    s = _open(tmp_path / "s.sqlite")
    s.mutate("urls", [Mutation.set(b"parent", {"f:a": b"1"})])  # the connection is open
    proc = multiprocessing.get_context("fork").Process(target=_forked_write, args=(s,))
    proc.start()
    proc.join(timeout=30)
    assert proc.exitcode == 0
    assert [k for k, _ in s.read_range("urls")] == [b"child", b"parent"]
    s.close()


def test_threads_share_a_store(tmp_path: Path) -> None:
    s = _open(tmp_path / "s.sqlite")
    errors: list[BaseException] = []
    won: list[int] = []

    def work(t: int) -> None:
        try:
            for i in range(0, 300, 10):
                s.mutate(
                    "urls",
                    [Mutation.set(b"%02d-%03d" % (t, j), {"f:t": b"%d" % t}) for j in range(i, i + 10)],
                )
                assert len(list(s.read_range("urls", b"%02d-" % t, b"%02d." % t))) == i + 10
            if s.check_and_set("meta", b"lease", "m:owner", None, b"%d" % t):
                won.append(t)
        except BaseException as exc:  # surfaced below; a thread cannot fail the test itself
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(won) == 1
    assert len(list(s.read_range("urls", keys_only=True))) == 8 * 300
    s.close()


# --- size estimate ----------------------------------------------------------------------


def test_estimate_rows_extrapolates_past_its_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import random
    import struct

    from beamcrawl.stores import interface

    rng = random.Random(9)
    with _open(tmp_path / "s.sqlite") as s:
        s.mutate("urls", [Mutation.set(struct.pack(">Q", rng.getrandbits(64)), {"u:a": b"1"}) for _ in range(20_000)])
        monkeypatch.setattr(interface, "ESTIMATE_EXACT_ROWS", 1_000)
        # Uniform 64-bit keys (the seen set's): 1,000 counted, the rest extrapolated.
        assert 17_000 <= s.estimate_rows("urls") <= 23_000


def test_page_caches_of_many_stores_stay_under_the_process_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each store object's connection has a page cache of its own; a worker opens several.
    # Together they stay near the process-wide soft limit instead of growing one cache each.
    import beamcrawl.stores.embedded as embedded

    assert sqlite_memory_used() is not None, "SQLite's memory figure is needed to check its limit"
    limit = 2 * 1024 * 1024
    monkeypatch.setattr(embedded, "SOFT_HEAP_LIMIT", limit)
    uri = f"sqlite:///{tmp_path}/store.sqlite"
    stores = [open_store(uri) for _ in range(4)]
    try:
        stores[0].mutate("urls", [Mutation.set(os.urandom(8), {"u:json": os.urandom(400)}) for _ in range(20_000)])
        before = sqlite_memory_used()
        for store in stores:  # each reads the whole table (~9 MB) through its own cache
            assert sum(1 for _ in store.read_range("urls")) == 20_000
        grown = sqlite_memory_used() - before
        assert grown < 3 * limit, grown  # without the limit: about 4 x 9 MB
    finally:
        for store in stores:
            store.close()
        monkeypatch.undo()
        open_store(uri).close()  # the limit is the whole process's: put the default back


def test_the_commit_hook_sees_each_write_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``COMMIT_HOOK`` (bench/store_locks.py's) gets each transaction's table, its start, the
    seconds waited for and holding the write lock, and its cells; unset, nothing is called."""
    from beamcrawl.stores import embedded

    seen: list[tuple] = []
    monkeypatch.setattr(embedded, "COMMIT_HOOK", lambda *args: seen.append(args))
    store = open_store(str(tmp_path))
    store.mutate("urls", [Mutation.set(b"a", {"u:x": b"1", "u:y": b"2"}), Mutation.delete_row(b"b")])
    store.write_cells("frontier", [(b"k", "r:json", b"{}")])
    assert [(table, cells) for table, _, _, _, cells in seen] == [("urls", 3), ("frontier", 1)]
    assert all(began > 0 and waited >= 0 and held >= 0 for _, began, waited, held, _ in seen)
    monkeypatch.setattr(embedded, "COMMIT_HOOK", None)
    store.write_cells("frontier", [(b"k", "r:json", b"{}")])
    assert len(seen) == 2
    store.close()


# --- split keys -------------------------------------------------------------------------


@pytest.mark.parametrize("rows_per_part", [1, 3, 10, 11, 100])
def test_split_keys_make_parts_of_exactly_the_size_asked(tmp_path: Path, rows_per_part: int) -> None:
    """SQLite walks its key index: every part but the last holds exactly ``rows_per_part``
    rows (a row of several cells counted once), the last what is left, none empty."""
    store = _open(tmp_path / "s")
    keys = [b"%04d" % i for i in range(0, 200, 2)]  # 100 rows, two cells each
    store.mutate("frontier", [Mutation.set(k, {"r:json": b"{}", "r:clock": b"1"}) for k in keys])
    splits = store.split_keys("frontier", b"0010", b"0170", rows_per_part)
    bounds = [b"0010", *splits, b"0170"]
    parts = [[k for k, _ in store.read_range("frontier", lo, hi, keys_only=True)] for lo, hi in zip(bounds, bounds[1:])]
    assert [k for part in parts for k in part] == [k for k in keys if b"0010" <= k < b"0170"]
    assert all(len(part) == rows_per_part for part in parts[:-1])
    assert 1 <= len(parts[-1]) <= rows_per_part
    store.close()
