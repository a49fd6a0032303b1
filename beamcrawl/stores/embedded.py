"""The embedded store: the Bigtable-shaped interface on one SQLite file (docs/ARCHITECTURE.md §2).

Each table is stored one row per *cell*, ``(k BLOB, c TEXT, v BLOB)`` with primary key
``(k, c)`` in a ``WITHOUT ROWID`` table, so the table is a B-tree clustered on the row key
like a Bigtable tablet: a key range is a primary-key range scan and SetCell is an upsert of
one cell that leaves the row's other cells alone. SQLite compares BLOBs with ``memcmp``, so
keys sort as unsigned bytes, exactly as in Bigtable.

Several processes (Beam workers) open the same file at once. The file is in WAL mode so
readers never block the writer; writers take SQLite's single write lock with
``BEGIN IMMEDIATE`` and wait for it up to a busy timeout instead of failing. A store object
holds one connection, guarded by a lock so threads of one process can share it, and drops
it when pickled: the copy in another process reopens the file on first use.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any

from beamcrawl.stores.interface import TABLES, Cell, Mutation, Row, Store, StoreError

_log = logging.getLogger(__name__)

# Marks a SQLite file as a beamcrawl store, so pointing the crawler at some other database
# fails loudly instead of adding tables to it. (ASCII "bcrl".)
APPLICATION_ID = 0x6263726C
# Bump when the on-disk layout changes; a newer file is refused rather than misread.
SCHEMA_VERSION = 1

STORE_FILENAME = "store.sqlite"
FILE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
BUSY_TIMEOUT_S = 60.0
# SQLite's memory in one process, page caches above all, stays near this (a soft limit, for
# the whole process: past it SQLite recycles cached pages rather than allocating more; the
# operating system's page cache still holds the file). Each store object holds a connection
# with a page cache of up to 32 MiB, and a round's worker opens one in every stage that
# reads or writes the store: in a 22k-page round on the local runner their caches grew the
# process by ~115 MB over the round (bench/memory_timeline.py). 32 MiB rather than 64: the
# round's peak, in URL seen's merge, held all 64, and a full-size round peaked 65-90 MB
# lower at 32 for no CPU its runs could show (bench/README.md, "SQLite's memory halved").
SOFT_HEAP_LIMIT = 32 * 1024 * 1024

_COLUMNS = [("k", "BLOB", 1), ("c", "TEXT", 2), ("v", "BLOB", 0)]  # name, type, pk index
_MISSING = "is missing tables"  # the one schema problem that creating the schema fixes

_INHERITED: list[sqlite3.Connection] = []  # see EmbeddedStore._use

# Called after each write transaction with (table, epoch seconds it began, seconds waited for
# the write lock, seconds holding it, cells written), where set: bench/store_locks.py sets it
# in every process of a round to see who waits for SQLite's one writer and how long.
COMMIT_HOOK: Callable[[str, float, float, float, int], None] | None = None

_Cell = tuple[bytes, str, bytes]
_Phase = tuple[list[tuple[bytes]], list[_Cell]]  # (row deletes, cell sets)


class EmbeddedStore(Store):
    """A :class:`~beamcrawl.stores.interface.Store` on one SQLite file.

    Open it with :meth:`from_uri` (or :func:`beamcrawl.stores.base.open_store`), which
    creates the file and its schema if needed. The object can be pickled into other
    processes on the same machine; they reopen the existing file lazily.

    Attributes:
        uri: ``sqlite:///`` plus the absolute path of the database file.
        path: Absolute path of the database file.
        write_batch: Mutations applied per write transaction; bounds how long one writer
            holds the file's write lock while others wait (about a second at the default).
            Large, because a commit writes every B-tree page its keys touched: rows with
            random keys (fingerprints, simhash tables) cost a page write each in small
            transactions and share pages in large ones (measured, 30k originals' 20
            simhash rows each into a 1M-row table: 314 µs per original in 10k-row
            transactions, 117 µs in 100k-row ones).
        read_chunk: Cells (or keys, for keys-only scans) fetched per query by
            :meth:`read_range`, so a scan streams instead of loading the table.
        keys_chunk: Keys per ``IN (...)`` query in :meth:`read_keys`.
    """

    write_batch: int = 100_000
    # Ten simhash tables, not twenty: every row is a B-tree insert under the file's one write
    # lock (two workers take turns), and a file holds far fewer pages than the 10^8-10^10
    # the twenty are for (core/content/textfp.py).
    simhash_tables: int = 10
    read_chunk: int = 4_096
    keys_chunk: int = 2_000
    # Measured (100k-row table, warm cache): a keys-only scan 1.6 us/key, read_keys
    # 1.8 us/key for 10k keys and 6.3 us/key for 100 keys.
    keyset_cost_ratio: float = 2.0

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        """Opens (and with ``create``, creates) the store at the database file ``path``.

        Args:
            path: The database file itself (not a directory).
            create: Create the file and schema when missing. Copies that reopen a store
                lazily pass False, so a worker that cannot see the file fails instead of
                silently starting an empty crawl state of its own.

        Raises:
            StoreError: The file cannot be opened or is not a beamcrawl store.
        """
        self.path = os.path.abspath(os.fspath(path))
        self.uri = "sqlite://" + self.path
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
        self._max_vars = 999
        self._lock = threading.Lock()
        self._sql = {t: _TableSQL(t) for t in TABLES}
        with self._lock:
            self._connect(create=create)

    # --- opening ---------------------------------------------------------------------

    @classmethod
    def from_uri(cls, uri: str) -> EmbeddedStore:
        """Opens the store named by ``uri``, creating it if needed.

        Accepted forms: ``sqlite:///abs/path``, ``sqlite://relative/path`` and a plain
        path. The path names the database file if it is an existing file or ends in
        ``.sqlite``, ``.sqlite3`` or ``.db``; otherwise it names a directory that holds
        ``store.sqlite``. Missing directories are created.

        Args:
            uri: The store URI or path.

        Returns:
            The open store.

        Raises:
            StoreError: The location is unusable, or the file is not a beamcrawl store.
        """
        raw = uri[len("sqlite://") :] if uri.startswith("sqlite://") else uri
        if not raw:
            raise StoreError(f"store URI {uri!r} names no path")
        if raw == ":memory:":
            # Workers in other processes could never see an in-memory database.
            raise StoreError("store :memory: is not supported; give a file or directory")
        path = Path(raw).expanduser().absolute()
        is_dir = path.is_dir() or (not path.is_file() and path.suffix.lower() not in FILE_SUFFIXES)
        directory = path if is_dir else path.parent
        if directory.exists() and not directory.is_dir():
            raise StoreError(f"store {path} cannot be created: {directory} is not a directory")
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"store {path} cannot be created: {directory}: {exc.strerror or exc}") from exc
        if is_dir:
            path = path / STORE_FILENAME
        return cls(path)

    def _connect(self, *, create: bool) -> sqlite3.Connection:
        """Opens the connection, sets it up and checks the schema. Caller holds the lock."""
        if create:
            parent = os.path.dirname(self.path)
            if not os.path.isdir(parent):
                raise StoreError(f"store {self.path} cannot be opened: {parent} is not a directory")
        elif not os.path.exists(self.path):
            raise StoreError(
                f"store {self.path} does not exist (an embedded store is only visible on the machine that created it)"
            )
        if os.path.exists(self.path) and not (
            os.access(self.path, os.W_OK) and os.access(os.path.dirname(self.path), os.W_OK)
        ):
            # SQLite would quietly open it read-only and fail only at the first write; the
            # directory must be writable too, for the WAL and shared-memory files.
            raise StoreError(f"store {self.path} is not writable")
        mode = "rwc" if create else "rw"
        try:
            conn = sqlite3.connect(
                f"{Path(self.path).as_uri()}?mode={mode}",
                uri=True,
                timeout=BUSY_TIMEOUT_S,
                # Transactions are explicit (BEGIN IMMEDIATE ... COMMIT), never implicit.
                isolation_level=None,
                # Threads share this connection; self._lock serialises every use of it.
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"store {self.path} cannot be opened: {exc}") from exc
        try:
            self._setup(conn, create=create)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._pid = os.getpid()
        self._max_vars = _variable_limit(conn)
        return conn

    def _setup(self, conn: sqlite3.Connection, *, create: bool) -> None:
        """Sets pragmas and checks (or creates) the schema on a fresh connection."""
        try:
            # The first read of the header is what detects a file that is not SQLite.
            conn.execute("PRAGMA schema_version").fetchone()
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                # Still correct (rollback journal), only readers then block the writer.
                _log.warning("store %s: WAL journal unavailable, using %s", self.path, mode)
            # In WAL mode NORMAL is durable against process crashes and only risks the
            # last commits on power loss, for a large gain in commit rate.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA temp_store=MEMORY")
            conn.execute("PRAGMA cache_size=-32768")  # KiB: 32 MiB page cache per connection
            conn.execute(f"PRAGMA soft_heap_limit={SOFT_HEAP_LIMIT}")  # ... all of them together
            self._check_schema(conn, create=create)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store {self.path} {_describe(exc)}") from exc

    def _check_schema(self, conn: sqlite3.Connection, *, create: bool) -> None:
        """Verifies the file is a beamcrawl store with every table, creating what is missing."""
        if self._schema_problem(conn) is None:
            return
        # Recheck under the write lock: another process may be creating the schema now.
        conn.execute("BEGIN IMMEDIATE")
        try:
            problem = self._schema_problem(conn)
            if problem == _MISSING and create:
                for table in TABLES:
                    conn.execute(
                        f"CREATE TABLE IF NOT EXISTS {table} "
                        "(k BLOB NOT NULL, c TEXT NOT NULL, v BLOB NOT NULL, "
                        "PRIMARY KEY (k, c)) WITHOUT ROWID"
                    )
                conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                problem = self._schema_problem(conn)
            if problem is not None:
                raise StoreError(f"store {self.path} {problem}")
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    @staticmethod
    def _schema_problem(conn: sqlite3.Connection) -> str | None:
        """Returns what is wrong with the schema, worded to follow the path, or None."""
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if not tables and app_id == 0:
            return _MISSING  # a new, empty database
        if app_id != APPLICATION_ID:
            return "is a SQLite database but not a beamcrawl store"
        if version > SCHEMA_VERSION:
            return f"has schema version {version}, newer than this beamcrawl ({SCHEMA_VERSION})"
        for table in TABLES:
            if table not in tables:
                return _MISSING
            info = conn.execute(f"PRAGMA table_info({table})").fetchall()
            if [(r[1], r[2].upper(), r[5]) for r in info] != _COLUMNS:
                return f"has table {table} with an unexpected layout"
        return None

    @contextmanager
    def _use(self) -> Iterator[sqlite3.Connection]:
        """Yields the connection under the lock, (re)opening it lazily in this process."""
        with self._lock:
            conn = self._conn
            if conn is None or self._pid != os.getpid():
                if conn is not None:
                    # A connection inherited through fork must not be used, nor even closed
                    # (closing may checkpoint or delete the WAL under the parent): keep it
                    # referenced so garbage collection never closes it.
                    _INHERITED.append(conn)
                self._conn = None
                conn = self._connect(create=False)
            try:
                yield conn
            except sqlite3.Error as exc:
                raise StoreError(f"store {self.path} {_describe(exc)}") from exc

    def close(self) -> None:
        """Closes the connection; the next call reopens the file."""
        with self._lock:
            if self._conn is not None:
                if self._pid == os.getpid():
                    self._conn.close()
                else:
                    _INHERITED.append(self._conn)  # inherited through fork; see _use
            self._conn = None

    def __getstate__(self) -> dict[str, Any]:
        # Connections and locks cannot cross processes; the copy reopens the file lazily.
        return {
            "path": self.path,
            "write_batch": self.write_batch,
            "read_chunk": self.read_chunk,
            "keys_chunk": self.keys_chunk,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self.uri = "sqlite://" + self.path
        self.write_batch = state["write_batch"]
        self.read_chunk = state["read_chunk"]
        self.keys_chunk = state["keys_chunk"]
        self._conn = None
        self._pid = None
        self._max_vars = 999
        self._lock = threading.Lock()
        self._sql = {t: _TableSQL(t) for t in TABLES}

    def __repr__(self) -> str:
        return f"EmbeddedStore({self.uri!r})"

    # --- reads -------------------------------------------------------------------------

    def read_range(
        self,
        table: str,
        start: bytes | None = None,
        end: bytes | None = None,
        *,
        keys_only: bool = False,
        limit: int | None = None,
    ) -> Iterator[Row]:
        """Yields rows with ``start <= key < end`` in key order.

        ``None`` or ``b""`` for a bound means unbounded (an empty end key is "no end" in
        Bigtable too). Rows are fetched ``read_chunk`` cells at a time, each chunk in its
        own short read, so a long scan holds no lock between chunks; every row is read
        whole within one chunk, so it is never torn by a concurrent write.

        Raises:
            ValueError: Unknown table or negative limit.
        """
        sql = self._sql[_check_table(table)]
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        lo = b"" if start is None else _bound(start)
        hi = None if end is None or not end else _bound(end)
        return self._scan(sql, lo, hi, keys_only, limit)

    def _scan(
        self,
        sql: _TableSQL,
        start: bytes,
        end: bytes | None,
        keys_only: bool,
        limit: int | None,
    ) -> Iterator[Row]:
        """The generator behind :meth:`read_range` (arguments already checked)."""
        remaining = limit
        lo: bytes | None = start
        while lo is not None and (end is None or lo < end):
            if remaining is not None and remaining <= 0:
                return
            if keys_only:
                rows, lo = self._key_chunk(sql, lo, end, remaining)
            else:
                rows, lo = self._row_chunk(sql, lo, end)
            if remaining is not None and len(rows) > remaining:
                rows = rows[:remaining]
            yield from rows
            if remaining is not None:
                remaining -= len(rows)

    def count_rows(self, table: str) -> int:
        """Counts the table's rows in SQLite, one walk of the clustered key index in C.

        The base class's client-side count brings every key into Python: 0.8-1.8 s of CPU
        for a 1 M-row frontier of two cells a row, this 0.17-0.45 s (about 5 times less,
        measured on this machine; 10 M rows: some 2-4 s, not 10-40).

        Raises:
            ValueError: Unknown table.
        """
        sql = self._sql[_check_table(table)]
        with self._use() as conn:
            ((n,),) = conn.execute(sql.count_keys).fetchall()
        return int(n)

    def split_keys(self, table: str, start: bytes, end: bytes, rows_per_part: int) -> list[bytes]:
        """Keys that cut ``[start, end)`` into parts of ``rows_per_part`` rows (the last part
        what is left), found in SQLite: each key one query that walks the clustered key
        index ``rows_per_part`` keys on from the one before, in C (the whole range one such
        walk, about what :meth:`count_rows` costs for it, where a scan of the rows costs
        Python per row). See :meth:`Store.split_keys`.

        Raises:
            ValueError: Unknown table, or ``rows_per_part`` below 1.
        """
        sql = self._sql[_check_table(table)]
        if rows_per_part < 1:
            raise ValueError(f"rows_per_part must be >= 1, got {rows_per_part}")
        lo = _bound(start)
        hi = None if not end else _bound(end)
        query = sql.nth_key(hi)
        splits: list[bytes] = []
        while True:
            with self._use() as conn:  # a query at a time: no lock held across the walk
                found = conn.execute(query, _params(lo, hi, rows_per_part)).fetchall()
            if not found:
                return splits
            lo = found[0][0]
            splits.append(lo)

    def _key_chunk(
        self, sql: _TableSQL, lo: bytes, hi: bytes | None, remaining: int | None
    ) -> tuple[list[Row], bytes | None]:
        """Reads up to ``read_chunk`` keys from ``lo``; returns them and where to resume."""
        n = self.read_chunk if remaining is None else min(self.read_chunk, remaining)
        with self._use() as conn:
            keys = [k for (k,) in conn.execute(sql.scan_keys(hi), _params(lo, hi, n))]
        # Keys come whole (no cells), so resume just after the last one.
        resume = keys[-1] + b"\x00" if len(keys) == n else None
        return [(k, {}) for k in keys], resume

    def _row_chunk(self, sql: _TableSQL, lo: bytes, hi: bytes | None) -> tuple[list[Row], bytes | None]:
        """Reads whole rows from ``lo``, about ``read_chunk`` cells of them.

        The chunk is one read transaction, so each row is one consistent snapshot.

        Returns:
            The rows, and the key to resume from (None when the range is exhausted).
        """
        n = max(self.read_chunk, 2)
        with self._use() as conn:
            conn.execute("BEGIN")
            try:
                cells = conn.execute(sql.scan_cells(hi), _params(lo, hi, n)).fetchall()
                if len(cells) == n and cells[0][0] == cells[-1][0]:
                    # One row wider than the chunk: finish it in the same snapshot.
                    cells += conn.execute(sql.row_rest, (cells[0][0], cells[-1][1])).fetchall()
                    return _group(cells), cells[0][0] + b"\x00"
            finally:
                _rollback(conn)  # read-only; this just ends the snapshot
        rows = _group(cells)
        if len(cells) < n:
            return rows, None  # the range is exhausted
        # The last row may continue past the chunk: drop it and start there next time.
        return rows[:-1], rows[-1][0]

    def read_keys(self, table: str, keys: Iterable[bytes], *, keys_only: bool = False) -> dict[bytes, dict[str, bytes]]:
        """Reads a set of keys with ``IN (...)`` queries of ``keys_chunk`` keys each.

        Duplicate keys are read once; keys not stored are absent from the result. All
        chunks are read in one read transaction, so the result is one consistent snapshot.
        (Measured against loading the keys into a temporary table and joining: the ``IN``
        lists are 2-3x faster for 10k keys; see tests/stores/bench_embedded.py.)

        Raises:
            ValueError: Unknown table or an empty key.
            TypeError: A key is not bytes.
        """
        sql = self._sql[_check_table(table)]
        wanted = sorted({_key(k) for k in keys})
        out: dict[bytes, dict[str, bytes]] = {}
        if not wanted:
            return out
        with self._use() as conn:
            step = max(1, min(self.keys_chunk, self._max_vars))
            conn.execute("BEGIN")
            try:
                for i in range(0, len(wanted), step):
                    chunk = wanted[i : i + step]
                    if keys_only:
                        for (k,) in conn.execute(sql.in_keys(len(chunk)), chunk):
                            out[k] = {}
                    else:
                        for k, c, v in conn.execute(sql.in_cells(len(chunk)), chunk):
                            out.setdefault(k, {})[c] = v
            finally:
                _rollback(conn)  # nothing was written; this just ends the snapshot
        return out

    # --- writes ------------------------------------------------------------------------

    def mutate(self, table: str, mutations: Iterable[Mutation]) -> None:
        """Applies mutations in order, ``write_batch`` mutations per transaction.

        Each batch is validated before it is written, so a bad mutation fails its batch
        as a whole (earlier batches stay applied).

        Raises:
            ValueError: Unknown table, empty key or malformed column name.
            TypeError: A key, column or value has the wrong type.
        """
        sql = self._sql[_check_table(table)]
        batch: list[Mutation] = []
        for m in mutations:
            batch.append(m)
            if len(batch) >= self.write_batch:
                self._apply(sql, batch)
                batch = []
        if batch:
            self._apply(sql, batch)

    def write_cells(self, table: str, cells: Sequence[Cell]) -> None:
        """Sets each ``(key, column, value)`` cell (the interface's method), ``write_batch``
        cells per transaction, each in key order, with no Mutation made: the checks that
        :meth:`mutate` makes a mutation at a time run over the batch at once.

        Raises:
            ValueError: Unknown table, empty key or malformed column name.
            TypeError: A key, column or value has the wrong type.
        """
        sql = self._sql[_check_table(table)]
        for at in range(0, len(cells), self.write_batch):
            self._commit(sql, [([], _checked_cells(cells[at : at + self.write_batch]))])

    def _apply(self, sql: _TableSQL, batch: Sequence[Mutation]) -> None:
        """Writes one batch in one transaction, with as few executemany calls as possible."""
        self._commit(sql, _plan(batch))

    def _commit(self, sql: _TableSQL, phases: list[_Phase]) -> None:
        """Applies ``phases`` (row deletes, then cell sets, in turn) in one transaction."""
        began = time.time()
        with self._use() as conn:
            asked = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            locked = time.perf_counter()
            try:
                for deletes, sets in phases:
                    if deletes:
                        conn.executemany(sql.delete_row, deletes)
                    if sets:
                        conn.executemany(sql.upsert, sets)
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
        if COMMIT_HOOK is not None:
            cells = sum(len(deletes) + len(sets) for deletes, sets in phases)
            COMMIT_HOOK(sql.table, began, locked - asked, time.perf_counter() - locked, cells)

    def check_and_set(self, table: str, key: bytes, column: str, expected: bytes | None, new: bytes | None) -> bool:
        """Sets ``column`` of ``key`` to ``new`` only if it holds ``expected``, atomically.

        The read and the write share one ``BEGIN IMMEDIATE`` transaction, which holds the
        file's write lock, so no other process can write between them.

        Raises:
            ValueError: Unknown table, empty key or malformed column name.
            TypeError: A key, column or value has the wrong type.
        """
        sql = self._sql[_check_table(table)]
        k = _key(key)
        c = _column(column)
        exp = None if expected is None else _value(expected)
        val = None if new is None else _value(new)
        with self._use() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(sql.get_cell, (k, c)).fetchone()
                if (None if row is None else row[0]) != exp:
                    conn.execute("ROLLBACK")
                    return False
                if val is None:
                    conn.execute(sql.delete_cell, (k, c))
                else:
                    conn.execute(sql.upsert, (k, c, val))
                conn.execute("COMMIT")
            except BaseException:
                _rollback(conn)
                raise
        return True


# --- helpers ---------------------------------------------------------------------------


class _TableSQL:
    """The SQL text for one table (table names come only from TABLES, never from input)."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.upsert = f"INSERT OR REPLACE INTO {table} (k, c, v) VALUES (?, ?, ?)"
        self.delete_row = f"DELETE FROM {table} WHERE k = ?"
        self.delete_cell = f"DELETE FROM {table} WHERE k = ? AND c = ?"
        self.get_cell = f"SELECT v FROM {table} WHERE k = ? AND c = ?"
        self.row_rest = f"SELECT k, c, v FROM {table} WHERE k = ? AND c > ? ORDER BY c"
        # On the clustered primary key, DISTINCT compares each key with the one before it.
        self.count_keys = f"SELECT COUNT(DISTINCT k) FROM {table}"

    def scan_cells(self, hi: bytes | None) -> str:
        bound = "" if hi is None else " AND k < ?"
        return f"SELECT k, c, v FROM {self.table} WHERE k >= ?{bound} ORDER BY k, c LIMIT ?"

    def scan_keys(self, hi: bytes | None) -> str:
        # GROUP BY on the primary-key prefix walks the index; no sort step.
        bound = "" if hi is None else " AND k < ?"
        return f"SELECT k FROM {self.table} WHERE k >= ?{bound} GROUP BY k ORDER BY k LIMIT ?"

    def nth_key(self, hi: bytes | None) -> str:
        # The key ``n`` keys on from the first at or after the bound (the OFFSET walks the
        # index as scan_keys does, nothing read but keys).
        bound = "" if hi is None else " AND k < ?"
        return f"SELECT k FROM {self.table} WHERE k >= ?{bound} GROUP BY k ORDER BY k LIMIT 1 OFFSET ?"

    def in_cells(self, n: int) -> str:
        return f"SELECT k, c, v FROM {self.table} WHERE k IN ({','.join('?' * n)})"

    def in_keys(self, n: int) -> str:
        return f"SELECT DISTINCT k FROM {self.table} WHERE k IN ({','.join('?' * n)})"


def _params(lo: bytes, hi: bytes | None, n: int) -> tuple[object, ...]:
    return (lo, n) if hi is None else (lo, hi, n)


def _group(cells: list[_Cell]) -> list[Row]:
    """Groups cells sorted by key into rows."""
    rows: list[Row] = []
    current: dict[str, bytes] = {}
    last: bytes | None = None
    for k, c, v in cells:
        if k != last:
            current = {}
            rows.append((k, current))
            last = k
        current[c] = v
    return rows


def _plan(batch: Sequence[Mutation]) -> list[_Phase]:
    """Turns mutations into phases of (row deletes, then cell sets) with the same effect.

    Mutations of different keys commute, so a row delete can run before every pending
    set of *other* keys. Only a delete of a key that already has a pending set must wait
    for that set, which closes the phase. A batch of ``delete_row`` + set per row thus
    becomes two executemany calls instead of two per row.
    """
    phases: list[_Phase] = []
    deletes: list[tuple[bytes]] = []
    sets: list[_Cell] = []
    set_keys: set[bytes] = set()
    columns: set[str] = set()  # names already checked: a batch repeats a few names
    for m in batch:
        if not isinstance(m, Mutation):
            raise TypeError(f"expected a Mutation, got {type(m).__name__}")
        k = _key(m.key)
        if m.delete:
            if k in set_keys:
                phases.append((deletes, sets))
                deletes, sets, set_keys = [], [], set()
            deletes.append((k,))
        if m.cells:
            for c, v in m.cells.items():
                if c not in columns:
                    columns.add(_column(c))
                sets.append((k, c, v if type(v) is bytes else _value(v)))
            set_keys.add(k)
    if deletes or sets:
        phases.append((deletes, sets))
    # Within a phase, deletes commute with each other and sets of different keys commute,
    # so sort by key (stably: sets of one key keep their order). Writing in key order
    # walks the B-tree once instead of jumping around it (measured 20-40% faster for
    # uniform fingerprint keys).
    for d, s in phases:
        d.sort()
        s.sort(key=itemgetter(0))
    return phases


def _checked_cells(cells: Sequence[Cell]) -> list[_Cell]:
    """``cells`` in key order (stably: a cell set twice keeps its later value), each key,
    name and value checked as :func:`_plan` checks a mutation's, and bytes-like keys and
    values made bytes. The usual batch (bytes, well-formed names) is checked by a few
    passes of builtins, not a Python call a cell.

    Raises:
        ValueError: An empty key or a malformed column name.
        TypeError: A key, column or value of the wrong type, or a cell that is not a triple.
    """
    out = list(cells)
    if not out:
        return out
    try:
        triples = set(map(len, out)) == {3}
    except TypeError:
        triples = False
    if not triples:
        raise TypeError("cells are (key, column, value) triples")
    if set(map(type, map(_CELL_KEY, out))) != {bytes} or set(map(type, map(_CELL_VALUE, out))) != {bytes}:
        out = [(_key(k), c, _value(v)) for k, c, v in out]
    elif b"" in map(_CELL_KEY, out):
        raise ValueError("row keys must not be empty")  # as _key says it
    distinct = set(map(_CELL_COLUMN, out))
    if set(map(type, distinct)) != {str} or min(map(str.find, distinct, repeat(":"))) < 1:
        for name in distinct:
            _column(name)  # raises for the first malformed one
    out.sort(key=_CELL_KEY)
    return out


_CELL_KEY, _CELL_COLUMN, _CELL_VALUE = itemgetter(0), itemgetter(1), itemgetter(2)


def _variable_limit(conn: sqlite3.Connection) -> int:
    """How many ``?`` parameters one statement may have in this SQLite build."""
    # Connection.getlimit and the constant are Python 3.11+.
    getlimit = getattr(conn, "getlimit", None)
    which = getattr(sqlite3, "SQLITE_LIMIT_VARIABLE_NUMBER", None)
    if getlimit is None or which is None:
        return 999  # the compiled-in default before SQLite 3.32
    return int(getlimit(which))


def _rollback(conn: sqlite3.Connection) -> None:
    """Rolls back if a transaction is open (a failed COMMIT may already have ended it)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _check_table(table: str) -> str:
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")
    return table


def _key(key: object) -> bytes:
    # A str key would be stored as TEXT and sort apart from every BLOB key; refuse it.
    if type(key) is not bytes:
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise TypeError(f"row keys are bytes, got {type(key).__name__}")
        key = bytes(key)
    if not key:
        raise ValueError("row keys must not be empty")  # as in Bigtable
    return key


def _bound(bound: object) -> bytes:
    if not isinstance(bound, (bytes, bytearray, memoryview)):
        raise TypeError(f"range bounds are bytes, got {type(bound).__name__}")
    return bytes(bound)


def _column(column: object) -> str:
    if type(column) is not str:
        raise TypeError(f"column names are str, got {type(column).__name__}")
    family, sep, _ = column.partition(":")
    if not sep or not family:
        raise ValueError(f"column {column!r} is not 'family:qualifier'")
    return column


def _value(value: object) -> bytes:
    if type(value) is not bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"cell values are bytes, got {type(value).__name__}")
        value = bytes(value)
    return value


def _describe(exc: sqlite3.Error) -> str:
    """Words a SQLite error for a one-line StoreError after the store path."""
    text = str(exc)
    if "file is not a database" in text:
        return "is not a SQLite database"
    if "malformed" in text:
        return "is corrupt (database disk image is malformed)"
    if "readonly" in text or "read-only" in text:
        return "is not writable"
    if "unable to open" in text:
        return "cannot be opened (unable to open database file)"
    return f"failed: {text}"


@functools.cache
def _sqlite_memory_fn() -> Any:
    with open("/proc/self/maps", encoding="ascii", errors="replace") as fh:
        libs = sorted({line.split()[-1] for line in fh if "libsqlite3" in line or "_sqlite3" in line})
    for lib in libs:
        try:
            fn = ctypes.CDLL(lib).sqlite3_memory_used
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_int64
        return fn
    return None


def sqlite_memory_used() -> int | None:
    """Bytes SQLite's allocator holds in this process (its page caches, mostly), or None
    where the library's ``sqlite3_memory_used`` cannot be found (no /proc, a static build)."""
    fn = _sqlite_memory_fn()
    return int(fn()) if fn is not None else None
