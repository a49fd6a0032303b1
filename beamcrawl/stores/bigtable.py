"""The Cloud Bigtable store: the store interface on Bigtable tables (docs/ARCHITECTURE.md §2).

``bigtable://PROJECT/INSTANCE[/TABLE_PREFIX]`` names an instance and a prefix; each of
:data:`~beamcrawl.stores.interface.TABLES` is one Bigtable table, ``PREFIX_TABLE`` (or just
``TABLE`` without a prefix). A cell ``"family:qualifier"`` is the Bigtable cell of that
family and qualifier. The tables and the column families in
:data:`~beamcrawl.stores.interface.FAMILIES` are created by :meth:`BigtableStore.create_tables`
(``beamcrawl store init``), each family with a garbage-collection rule of one version,
so a set overwrites.

How the interface maps onto Bigtable:

- ``read_range`` is one ReadRows stream over a row range; ``keys_only`` adds the
  strip-value filter and a one-cell-per-row limit, so only keys cross the network.
- ``read_keys`` is one ReadRows request per :attr:`BigtableStore.keys_chunk` keys, with the
  keys as the request's row set.
- Both read plain protobuf responses on the calling thread and merge their chunks into
  rows themselves, resuming a broken stream after its last row (``stores/bigtable_reads.py``:
  the data client's read path cost some seven times the CPU a row).
- ``mutate`` is MutateRows, :attr:`BigtableStore.write_batch` rows per request. Bigtable
  does not order the entries of one request, so the mutations of one key within a batch
  are folded into one entry (a row delete, then the last value of each cell) whose
  mutations apply in order, atomically. Entries that fail transiently are sent again
  with back-off; every mutation is idempotent (explicit timestamps), so that is safe.
  The request is built from plain protobuf messages: the data client's per-cell
  proto-plus objects cost ~240 us a row (20,000 rows: 4.8 s against 0.26 s).
- ``check_and_set`` is CheckAndMutateRow with a predicate that selects the newest version
  of the one cell and, when a value is expected, exactly that value.

Versions. A SetCell adds a version; garbage collection drops older ones only later, so
every read asks for the newest version of each column (``CellsColumnLimitFilter(1)``).
Timestamps are the writer's clock in milliseconds (Bigtable's granularity), never going
back within one store object; a set at the same millisecond replaces the cell. Writers on
different machines rely on synchronised clocks to order writes to the *same* cell; the
crawl writes each cell from one place per round, and the lease (``check_and_set``)
replaces every version of its cell, so it never depends on clocks.

Clients. One data client and one generated (GAPIC) client are shared by the store objects
of a process and closed when the last one closes. A store pickles to its URI and settings and reopens
lazily in the new process (Beam workers), and never touches a client inherited by fork.
The emulator is used when ``BIGTABLE_EMULATOR_HOST`` is set (see ``stores/emulator.py``).
"""

from __future__ import annotations

import logging
import os
import random
import re
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from google.api_core import exceptions as api_exceptions
from google.api_core.gapic_v1 import routing_header
from google.cloud.bigtable.data import (
    BigtableDataClient,
    DeleteRangeFromColumn,
    ReadRowsQuery,
    SetCell,
)
from google.cloud.bigtable.data import row_filters as rf
from google.cloud.bigtable_v2.types import bigtable as _bigtable_types

from beamcrawl.stores import bigtable_reads
from beamcrawl.stores.interface import (
    ESTIMATE_EXACT_ROWS,
    FAMILIES,
    TABLES,
    Mutation,
    Row,
    Store,
    StoreError,
    check_bound,
    check_column,
    check_key,
    check_table,
    check_value,
)

_log = logging.getLogger(__name__)

SCHEME = "bigtable://"
EMULATOR_HOST_ENV = "BIGTABLE_EMULATOR_HOST"
# Bigtable table ids: letters, digits, '_', '-', '.', starting with a letter/digit/'_'.
_TABLE_ID = re.compile(r"[A-Za-z0-9_][-_.A-Za-z0-9]*")
_MAX_TABLE_ID = 50
# A MutateRows request may carry at most 100,000 mutations; stay well below.
MAX_MUTATIONS_PER_REQUEST = 50_000
# Retry a check-and-set whose outcome is unknown (the request failed in transit).
CAS_ATTEMPTS = 4
# Back-off between the attempts of a write (MutateRows entries, a check-and-set): the first
# wait in seconds, doubled after each attempt up to the longest.
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 5.0
# Per-entry status codes of MutateRows worth another try: DEADLINE_EXCEEDED,
# RESOURCE_EXHAUSTED (throttled), ABORTED, UNAVAILABLE.
RETRYABLE_CODES = frozenset({4, 8, 10, 14})
_TRANSIENT = (
    api_exceptions.ServiceUnavailable,
    api_exceptions.DeadlineExceeded,
    api_exceptions.Aborted,
    api_exceptions.InternalServerError,
)


# Plain protobuf classes behind the proto-plus types (cheap to build in bulk).
_MutateRowsRequest = _bigtable_types.MutateRowsRequest.pb()
_Entry = _bigtable_types.MutateRowsRequest.Entry.pb()

# Newest version of every column: correct before garbage collection has run.
_LATEST = rf.CellsColumnLimitFilter(1)
# Keys only: one cell per row, value stripped.
_KEYS_ONLY = rf.RowFilterChain([rf.CellsRowLimitFilter(1), rf.StripValueTransformerFilter(True)])
# The same two as plain protobuf, for the store's own reads.
_LATEST_PB = bigtable_reads.latest_filter()
_KEYS_ONLY_PB = bigtable_reads.keys_only_filter()


def parse_uri(uri: str) -> tuple[str, str, str]:
    """Splits ``bigtable://PROJECT/INSTANCE[/TABLE_PREFIX]``.

    Returns:
        ``(project, instance, prefix)``; prefix is ``""`` when absent.

    Raises:
        StoreError: The URI is malformed (the message says how).
    """
    if not uri.startswith(SCHEME):
        raise StoreError(f"store URI {uri!r} is not bigtable://PROJECT/INSTANCE[/TABLE_PREFIX]")
    parts = uri[len(SCHEME) :].rstrip("/").split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise StoreError(f"store URI {uri!r} is not bigtable://PROJECT/INSTANCE[/TABLE_PREFIX]")
    project, instance = parts[0], parts[1]
    prefix = parts[2] if len(parts) == 3 else ""
    longest = max(len(t) for t in TABLES) + 1
    if prefix and (not _TABLE_ID.fullmatch(prefix) or len(prefix) + longest > _MAX_TABLE_ID):
        raise StoreError(
            f"store URI {uri!r}: table prefix {prefix!r} must be letters, digits, '_', '-' or '.' "
            f"and at most {_MAX_TABLE_ID - longest} characters"
        )
    return project, instance, prefix


# --- one pair of clients per process -------------------------------------------------------


class _Clients:
    """The clients a process shares: the data client (reads, check-and-mutate, samples)
    and the generated GAPIC client, used for MutateRows with plain protobuf messages
    (the data client builds proto-plus objects per cell: measured ~19x slower)."""

    def __init__(self, project: str) -> None:
        from google.cloud.bigtable_v2 import BigtableClient
        from google.cloud.bigtable_v2.services.bigtable.transports import BigtableGrpcTransport

        emulator = os.environ.get(EMULATOR_HOST_ENV)
        if not emulator:
            _require_credentials(project)
        with _quiet():
            self.data = BigtableDataClient(project=project)
        if emulator:
            import grpc

            # The emulator speaks plain gRPC without credentials, as the data client does.
            transport = BigtableGrpcTransport(
                channel=grpc.insecure_channel(emulator, options=bigtable_reads.CHANNEL_OPTIONS)
            )
        else:
            transport = BigtableGrpcTransport(channel=_channel_streaming_on_caller)
        self.gapic = BigtableClient(transport=transport)
        # ReadRows on plain protobuf messages over the same channel (stores/bigtable_reads.py).
        self.read_rows = transport.grpc_channel.unary_stream(
            bigtable_reads.READ_ROWS_METHOD,
            request_serializer=bigtable_reads.ReadRowsRequest.SerializeToString,
            response_deserializer=bigtable_reads.ReadRowsResponse.FromString,
        )
        self.refs = 0

    def close(self) -> None:
        self.data.close()
        self.gapic.transport.close()


def _channel_streaming_on_caller(host: str, **kwargs: Any) -> Any:
    """The generated transport's own channel (credentials, scopes, its options), with
    server streams read on the calling thread (:data:`bigtable_reads.STREAM_ON_CALLER`)."""
    from google.cloud.bigtable_v2.services.bigtable.transports import BigtableGrpcTransport

    kwargs["options"] = [*kwargs.get("options", ()), bigtable_reads.STREAM_ON_CALLER]
    return BigtableGrpcTransport.create_channel(host, **kwargs)


def _require_credentials(project: str) -> None:
    """Raises StoreError, one line, when Cloud Bigtable would find no credentials."""
    from beamcrawl.core.runtime.gcp import NoCredentials, require_credentials

    try:
        require_credentials(
            f"Bigtable (project {project})",
            f"or, for the local emulator, set {EMULATOR_HOST_ENV}=HOST:PORT "
            "(start one with `gcloud beta emulators bigtable start`)",
        )
    except NoCredentials as exc:
        raise StoreError(str(exc)) from None


_CLIENTS_LOCK = threading.Lock()
_CLIENTS: dict[tuple[int, str, str | None], _Clients] = {}  # (pid, project, emulator)


def _acquire_clients(project: str) -> tuple[tuple[int, str, str | None], _Clients]:
    key = (os.getpid(), project, os.environ.get(EMULATOR_HOST_ENV))
    with _CLIENTS_LOCK:
        clients = _CLIENTS.get(key)
        if clients is None:
            clients = _CLIENTS[key] = _Clients(project)
        clients.refs += 1
        return key, clients


def _release_clients(key: tuple[int, str, str | None]) -> None:
    with _CLIENTS_LOCK:
        clients = _CLIENTS.get(key)
        if clients is None:
            return
        clients.refs -= 1
        if clients.refs > 0:
            return
        del _CLIENTS[key]
    if key[0] == os.getpid():
        clients.close()


# --- the store ------------------------------------------------------------------------------


class BigtableStore(Store):
    """A :class:`~beamcrawl.stores.interface.Store` on Cloud Bigtable (or its emulator).

    Open it with :meth:`from_uri` (or :func:`~beamcrawl.stores.base.open_store`), which
    checks that the tables exist; create them once with :meth:`create_tables`.

    Attributes:
        uri: The ``bigtable://`` URI.
        project: Cloud project id.
        instance: Bigtable instance id.
        prefix: Table-name prefix (``""`` for none).
        write_batch: Rows per MutateRows request.
        keys_chunk: Keys per ReadRows request in :meth:`read_keys`.
        mutate_timeout: Seconds :meth:`mutate` keeps retrying a batch's failed rows.
        mutate_attempts: Requests :meth:`mutate` sends for one batch at most.
        attempt_timeout: Seconds one MutateRows request may take.
        read_attempt_timeout: Seconds one ReadRows attempt may take before the read is
            resumed after its last row.
        read_timeout: Seconds a read may take over all its attempts.
    """

    write_batch: int = 2_000
    keys_chunk: int = 10_000
    mutate_timeout: float = 600.0
    mutate_attempts: int = 10
    attempt_timeout: float = 60.0
    read_attempt_timeout: float = 20.0
    read_timeout: float = 600.0
    # Seconds the open-time check of each table may take (an unreachable store fails then).
    probe_timeout: float = 10.0
    # A key-set read seeks per key while a scan streams: Cloud Bigtable's published
    # per-node figures (~17k point reads/s against ~220 MB/s of scan, i.e. ~1M small rows/s)
    # put a scattered read near 50 scanned rows. Conservative, as the emulator cannot
    # measure it (it sends one message per row either way).
    keyset_cost_ratio: float = 32.0

    def __init__(self, project: str, instance: str, prefix: str = "") -> None:
        """Names the store; connects lazily on first use.

        Args:
            project: Cloud project id (any name on the emulator).
            instance: Bigtable instance id (any name on the emulator).
            prefix: Table-name prefix; tables are ``PREFIX_urls`` and so on.
        """
        self.project = project
        self.instance = instance
        self.prefix = prefix
        self.uri = f"{SCHEME}{project}/{instance}" + (f"/{prefix}" if prefix else "")
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._clients: _Clients | None = None
        self._clients_key: tuple[int, str, str | None] | None = None
        self._tables: dict[str, Any] = {}
        self._last_ms = 0
        self._extra_families: dict[str, set[str]] = {t: set() for t in TABLES}

    @classmethod
    def from_uri(cls, uri: str, *, check: bool = True) -> BigtableStore:
        """Opens ``bigtable://PROJECT/INSTANCE[/TABLE_PREFIX]``.

        Args:
            uri: The store URI.
            check: Verify that every table exists (one small read each), so a crawl
                pointed at an uninitialised instance fails at once with a clear message.

        Raises:
            StoreError: Malformed URI, or (with ``check``) tables missing or unreachable.
        """
        store = cls(*parse_uri(uri))
        if check:
            missing = store.missing_tables()
            if missing:
                store.close()
                raise StoreError(
                    f"store {store.uri} has no table(s) {', '.join(missing)}; create them with: "
                    f"beamcrawl store init --store {store.uri}"
                )
        return store

    def table_id(self, table: str) -> str:
        """The Bigtable table id of one of the store's tables."""
        check_table(table)
        return f"{self.prefix}_{table}" if self.prefix else table

    def __repr__(self) -> str:
        return f"BigtableStore({self.uri!r})"

    def __getstate__(self) -> dict[str, Any]:
        # Clients and channels cannot cross processes; the copy connects on first use.
        return {
            "project": self.project,
            "instance": self.instance,
            "prefix": self.prefix,
            "write_batch": self.write_batch,
            "keys_chunk": self.keys_chunk,
            "mutate_timeout": self.mutate_timeout,
            "mutate_attempts": self.mutate_attempts,
            "attempt_timeout": self.attempt_timeout,
            "read_attempt_timeout": self.read_attempt_timeout,
            "read_timeout": self.read_timeout,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["project"], state["instance"], state["prefix"])  # type: ignore[misc]
        self.write_batch = state["write_batch"]
        self.keys_chunk = state["keys_chunk"]
        self.mutate_timeout = state["mutate_timeout"]
        self.mutate_attempts = state["mutate_attempts"]
        self.attempt_timeout = state["attempt_timeout"]
        self.read_attempt_timeout = state["read_attempt_timeout"]
        self.read_timeout = state["read_timeout"]

    # --- connections ---------------------------------------------------------------------

    def _connected(self) -> _Clients:
        """This process's clients, connecting if needed. Caller holds the lock."""
        if self._clients_key is not None and self._clients_key[0] != os.getpid():
            # Inherited through fork: gRPC state must not be used (nor closed) here.
            self._clients, self._clients_key, self._tables = None, None, {}
        if self._clients is None:
            self._clients_key, self._clients = _acquire_clients(self.project)
        return self._clients

    def _table(self, table: str) -> Any:
        """The data-API table object, connecting in this process if needed."""
        check_table(table)
        with self._lock:
            clients = self._connected()
            found = self._tables.get(table)
            if found is None:
                found = clients.data.get_table(self.instance, self.table_id(table))
                self._tables[table] = found
            return found

    def _gapic(self) -> Any:
        with self._lock:
            return self._connected().gapic

    def table_name(self, table: str) -> str:
        """The table's full resource name, as the Bigtable API takes it."""
        return f"projects/{self.project}/instances/{self.instance}/tables/{self.table_id(table)}"

    def close(self) -> None:
        """Releases this store's share of the process's clients; the next call reconnects."""
        with self._lock:
            key, self._clients, self._clients_key, self._tables = self._clients_key, None, None, {}
        if key is not None:
            _release_clients(key)

    @contextmanager
    def _errors(self, table: str) -> Iterator[None]:
        """Turns Bigtable errors into one-line :class:`StoreError`\\ s naming the table."""
        try:
            yield
        except StoreError:
            raise
        except api_exceptions.NotFound as exc:
            raise StoreError(
                f"store {self.uri}: table {self.table_id(table)} not found ({_first_line(exc)}); "
                f"create the tables with: beamcrawl store init --store {self.uri}"
            ) from exc
        except api_exceptions.GoogleAPIError as exc:
            raise StoreError(f"store {self.uri}: {self.table_id(table)}: {_first_line(exc)}") from exc
        except bigtable_reads.InvalidChunk as exc:
            raise StoreError(f"store {self.uri}: {self.table_id(table)}: a broken ReadRows response: {exc}") from exc

    def _timestamp_micros(self) -> int:
        """Now, in microseconds at millisecond granularity, never behind an earlier call."""
        now_ms = time.time_ns() // 1_000_000
        with self._lock:
            self._last_ms = max(self._last_ms, now_ms)
            return self._last_ms * 1000

    # --- reads ---------------------------------------------------------------------------

    def read_range(
        self,
        table: str,
        start: bytes | None = None,
        end: bytes | None = None,
        *,
        keys_only: bool = False,
        limit: int | None = None,
    ) -> Iterator[Row]:
        """Yields rows with ``start <= key < end`` in key order, streamed.

        ``None`` or ``b""`` for a bound means unbounded, as in Bigtable.

        Raises:
            ValueError: Unknown table or negative limit.
            TypeError: A bound is not bytes.
        """
        check_table(table)
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        lo = check_bound(start) if start else None
        hi = check_bound(end) if end else None
        return self._scan(table, lo, hi, keys_only, limit)

    def _scan(
        self, table: str, lo: bytes | None, hi: bytes | None, keys_only: bool, limit: int | None
    ) -> Iterator[Row]:
        """The generator behind :meth:`read_range` (arguments already checked)."""
        if limit == 0 or (lo is not None and hi is not None and lo >= hi):
            return  # Bigtable reads rows_limit=0 as "no limit" and rejects lo > hi
        request = bigtable_reads.ReadRowsRequest(filter=_KEYS_ONLY_PB if keys_only else _LATEST_PB)
        if lo is not None or hi is not None:
            bounds = request.rows.row_ranges.add()
            if lo is not None:
                bounds.start_key_closed = lo
            if hi is not None:
                bounds.end_key_open = hi
        if limit is not None:
            request.rows_limit = limit
        with self._errors(table):
            yield from self._read(table, request, keys_only)

    def read_keys(self, table: str, keys: Iterable[bytes], *, keys_only: bool = False) -> dict[bytes, dict[str, bytes]]:
        """Reads a set of keys, one ReadRows request (a row set) per ``keys_chunk`` keys.

        Duplicate keys are read once; keys not stored are absent from the result.

        Raises:
            ValueError: Unknown table or an empty key.
            TypeError: A key is not bytes.
        """
        check_table(table)
        wanted = sorted({check_key(k) for k in keys})
        out: dict[bytes, dict[str, bytes]] = {}
        if not wanted:
            return out
        step = max(1, self.keys_chunk)
        with self._errors(table):
            for i in range(0, len(wanted), step):
                request = bigtable_reads.ReadRowsRequest(filter=_KEYS_ONLY_PB if keys_only else _LATEST_PB)
                request.rows.row_keys.extend(wanted[i : i + step])
                out.update(self._read(table, request, keys_only))
        return out

    def _read(self, table: str, request: Any, keys_only: bool) -> Iterator[Row]:
        """The rows of one ReadRows request on ``table``, read on this thread as plain
        protobuf and resumed after transient failures (stores/bigtable_reads.py)."""
        name = self.table_name(table)
        request.table_name = name
        with self._lock:
            call = self._connected().read_rows
        return bigtable_reads.read_rows(
            call,
            request,
            keys_only=keys_only,
            metadata=[routing_header.to_grpc_metadata((("table_name", name),))],
            attempt_timeout=self.read_attempt_timeout,
            timeout=self.read_timeout,
            backoff=(BACKOFF_FIRST, BACKOFF_MAX),
        )

    def report_rows(self, table: str) -> tuple[int, bool]:
        """The row count a round reports: exact below
        :data:`~beamcrawl.stores.interface.ESTIMATE_EXACT_ROWS` rows, else
        :meth:`estimate_rows` (SampleRowKeys and a short scan). Bigtable has no count: an
        exact one is every key of the table streamed to the client, which after every round
        of a billion-row frontier would take longer than the round.

        Raises:
            ValueError: Unknown table.
            StoreError: The table is missing or unreachable.
        """
        n = self.estimate_rows(table)
        return n, n < ESTIMATE_EXACT_ROWS

    def estimate_rows(self, table: str) -> int:
        """Estimates the row count from SampleRowKeys (one cheap request) and a short scan.

        SampleRowKeys gives sample keys with the table's size in bytes before each, and
        the total. Bytes become rows at the table's bytes per row, measured on the first
        sample (rows counted before it, keys only) when that sample is near the start, else
        from the sizes of a few rows. A table estimated below
        :data:`~beamcrawl.stores.interface.ESTIMATE_EXACT_ROWS` rows is simply counted.

        Raises:
            ValueError: Unknown table.
            StoreError: The table is missing or unreachable.
        """
        check_table(table)
        with self._errors(table):
            samples = sorted(self._table(table).sample_row_keys(), key=lambda s: s[1])
        total = samples[-1][1] if samples else 0
        per_row = 0.0
        for key, offset in samples:
            if key and offset > 0:
                counted = sum(1 for _ in self.read_range(table, end=key, keys_only=True, limit=ESTIMATE_EXACT_ROWS))
                if counted < ESTIMATE_EXACT_ROWS:
                    per_row = offset / max(counted, 1)
                break
        if not per_row:
            sizes = [_stored_bytes(k, c) for k, c in self.read_range(table, limit=256)]
            per_row = sum(sizes) / len(sizes) if sizes else 0.0
        if not per_row or total / per_row < ESTIMATE_EXACT_ROWS:
            return super().estimate_rows(table)  # small: count exactly
        return round(total / per_row)

    def split_keys(self, table: str, start: bytes, end: bytes, rows_per_part: int) -> list[bytes]:
        """Keys that cut ``[start, end)`` into parts of about ``rows_per_part`` rows, from
        SampleRowKeys (one cheap request, as Beam's own Bigtable source splits a read): the
        samples inside the range, thinned so that about ``rows_per_part`` rows' bytes lie
        between two kept ones (bytes a row as the samples count them, from the rows before
        the first sample in the range; a part ends at the sample nearest its size). Nothing is
        read but those few rows (at most ``ESTIMATE_EXACT_ROWS`` keys), so a range of a
        billion rows costs what a small one does; parts are as even as the samples are. See :meth:`Store.split_keys`.

        Raises:
            ValueError: Unknown table, or ``rows_per_part`` below 1.
            StoreError: The table is missing or unreachable.
        """
        check_table(table)
        if rows_per_part < 1:
            raise ValueError(f"rows_per_part must be >= 1, got {rows_per_part}")
        lo = check_bound(start)
        hi = check_bound(end) if end else None
        sizes = [_stored_bytes(k, c) for k, c in self.read_range(table, lo, hi, limit=256)]
        if len(sizes) < 256 and len(sizes) <= rows_per_part:
            return []  # the whole range is in hand: one part
        with self._errors(table):
            samples = sorted(self._table(table).sample_row_keys(), key=lambda s: s[1])
        step = rows_per_part * self._sample_bytes_a_row(table, lo, samples, sizes)
        splits: list[bytes] = []
        last = 0
        passed: tuple[bytes, int] | None = None  # the last sample inside the range not kept
        for key, offset in samples:
            if not key:
                break  # the table's end
            if key <= lo:
                last = offset  # bytes before the range (about)
                continue
            if hi is not None and key >= hi:
                break
            if offset - last < step:
                passed = (key, offset)
                continue
            # A part ends at whichever of the two samples around its size is nearer to it.
            if passed is not None and last + step - passed[1] < offset - (last + step):
                splits.append(passed[0])
                last = passed[1]
            passed = None
            if offset - last >= step:
                splits.append(key)
                last = offset
            else:
                passed = (key, offset)
        return splits

    def _sample_bytes_a_row(self, table: str, lo: bytes, samples: list[tuple[bytes, int]], sizes: list[int]) -> float:
        """Bytes a row as the samples' offsets count them (stored, compressed, whatever the
        server counts): the rows from ``lo`` to the first sample after it, counted keys only
        when there are at most :data:`ESTIMATE_EXACT_ROWS` of them; else the rows' own sizes."""
        before = 0
        for key, offset in samples:
            if key and key <= lo:
                before = offset
                continue
            if not key or offset <= before:
                break
            counted = sum(1 for _ in self.read_range(table, lo, key, keys_only=True, limit=ESTIMATE_EXACT_ROWS))
            if 0 < counted < ESTIMATE_EXACT_ROWS:
                return (offset - before) / counted
            break
        return sum(sizes) / len(sizes)

    # --- writes --------------------------------------------------------------------------

    def mutate(self, table: str, mutations: Iterable[Mutation]) -> None:
        """Applies mutations in order, ``write_batch`` rows per MutateRows request.

        Each batch is validated before it is sent, so a bad mutation fails its batch as a
        whole (earlier batches stay applied).

        Raises:
            ValueError: Unknown table, empty key or malformed column name.
            TypeError: A key, column or value has the wrong type.
            StoreError: Bigtable refused the writes, or retries ran out.
        """
        check_table(table)
        batch: list[Mutation] = []
        cells = 0
        for m in mutations:
            batch.append(m)
            cells += 1 + (len(m.cells) if isinstance(m, Mutation) and m.cells else 0)
            if len(batch) >= self.write_batch or cells >= MAX_MUTATIONS_PER_REQUEST:
                self._apply(table, batch)
                batch, cells = [], 0
        if batch:
            self._apply(table, batch)

    def _apply(self, table: str, batch: Sequence[Mutation]) -> None:
        """Sends one batch as one MutateRows request, retrying entries that failed."""
        plans = fold_mutations(batch)
        self._ensure_families(table, {c.partition(":")[0] for _, _, cells in plans for c in cells})
        ts = self._timestamp_micros()
        entries = [_entry_pb(key, delete, cells, ts) for key, delete, cells in plans if delete or cells]
        if entries:
            with self._errors(table):
                self._mutate_rows(table, entries)

    def _mutate_rows(self, table: str, entries: list[Any]) -> None:
        """MutateRows with retries.

        Entries that failed transiently (or whose outcome a broken stream never reported)
        are sent again, with exponential back-off, up to :attr:`mutate_attempts` requests
        and :attr:`mutate_timeout` seconds. Every entry is idempotent (explicit timestamps,
        row deletes), so sending one twice is harmless.

        Raises:
            StoreError: An entry failed permanently, or retries ran out of time.
        """
        gapic = self._gapic()
        name = self.table_name(table)
        deadline = time.monotonic() + self.mutate_timeout
        delay = BACKOFF_FIRST
        pending = entries
        attempts = 0
        while True:
            attempts += 1
            request = _MutateRowsRequest(table_name=name)
            request.entries.extend(pending)
            ok = [False] * len(pending)
            failure: str | None = None
            try:
                for response in gapic.mutate_rows(request=request, retry=None, timeout=self.attempt_timeout):
                    for result in type(response).pb(response).entries:
                        code = result.status.code
                        if code == 0:
                            ok[result.index] = True
                        elif code in RETRYABLE_CODES:
                            pass  # sent again below
                        else:
                            ok[result.index] = True  # not retried
                            failure = failure or f"{_code_name(code)}: {result.status.message}"
            except _TRANSIENT as exc:
                # The stream broke: entries it did not report are sent again below.
                _log.info("%s: MutateRows attempt %d broke (%s); retrying", name, attempts, _first_line(exc))
            if failure is not None:
                hint = (
                    f"; is the store initialised? beamcrawl store init --store {self.uri}"
                    if "family" in failure
                    else ""
                )
                raise StoreError(f"store {self.uri}: writing to {self.table_id(table)} failed: {failure}{hint}")
            again = [entry for entry, done in zip(pending, ok) if not done]
            if not again:
                return
            if attempts >= self.mutate_attempts or time.monotonic() + delay > deadline:
                raise StoreError(
                    f"store {self.uri}: {len(again)} row write(s) to {self.table_id(table)} still failing "
                    f"after {attempts} attempts"
                )
            time.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, BACKOFF_MAX)
            pending = again

    def check_and_set(self, table: str, key: bytes, column: str, expected: bytes | None, new: bytes | None) -> bool:
        """Sets ``column`` of ``key`` to ``new`` only if its newest value is ``expected``.

        One CheckAndMutateRow: the predicate selects the newest version of the cell (and,
        when ``expected`` is bytes, only if it equals ``expected`` exactly); ``expected=None``
        means the cell must be absent. The write deletes every version of the cell and,
        unless ``new`` is None, sets ``new`` — so the cell never keeps an older version
        that a skewed clock could bring back.

        A request that fails in transit (outcome unknown) is resolved by reading the cell:
        holding ``new`` counts as done, which assumes ``new`` is unique to this caller (the
        lease's values are).

        Raises:
            ValueError: Unknown table, empty key or malformed column name.
            TypeError: A key, column or value has the wrong type.
            StoreError: Bigtable failed repeatedly.
        """
        check_table(table)
        k = check_key(key)
        c = check_column(column)
        exp = None if expected is None else check_value(expected)
        val = None if new is None else check_value(new)
        family, _, qualifier = c.partition(":")
        self._ensure_families(table, {family})
        delay = BACKOFF_FIRST
        for attempt in range(CAS_ATTEMPTS):
            try:
                with self._errors(table):
                    return self._check_and_set_once(table, k, family, qualifier, exp, val)
            except StoreError as exc:
                if not isinstance(exc.__cause__, _TRANSIENT) or attempt + 1 == CAS_ATTEMPTS:
                    raise
            current = self.read_keys(table, [k]).get(k, {}).get(c)
            if current == val and val != exp:
                return True  # the failed attempt was applied after all
            if current != exp:
                return False
            time.sleep(delay)  # not applied: the cell still holds what we expect; try again
            delay = min(delay * 2, BACKOFF_MAX)
        raise AssertionError("unreachable")  # pragma: no cover

    def _check_and_set_once(
        self,
        table: str,
        key: bytes,
        family: str,
        qualifier: str,
        expected: bytes | None,
        new: bytes | None,
    ) -> bool:
        q = qualifier.encode()
        cell = [rf.ColumnRangeFilter(family, q, q, inclusive_start=True, inclusive_end=True), _LATEST]
        write: list[Any] = [DeleteRangeFromColumn(family, q)]
        if new is not None:
            write.append(SetCell(family, q, new, self._timestamp_micros()))
        bt = self._table(table)
        if expected is None:
            present = bt.check_and_mutate_row(key, rf.RowFilterChain(cell), false_case_mutations=write)
            return not present
        predicate = rf.RowFilterChain(
            [*cell, rf.ValueRangeFilter(expected, expected, inclusive_start=True, inclusive_end=True)]
        )
        return bool(bt.check_and_mutate_row(key, predicate, true_case_mutations=write))

    # --- tables and families (admin API) ----------------------------------------------

    def _admin_table(self, table: str) -> Any:
        """The admin-API table (the legacy client honours BIGTABLE_EMULATOR_HOST).

        Admin calls are rare (``store init``, a family used for the first time), so the
        client is made per call rather than kept.
        """
        from google.cloud import bigtable

        if not os.environ.get(EMULATOR_HOST_ENV):
            _require_credentials(self.project)
        client = bigtable.Client(project=self.project, admin=True)
        return client.instance(self.instance).table(self.table_id(table))

    def _ensure_families(self, table: str, families: set[str]) -> None:
        """Creates column families outside :data:`FAMILIES` on first use.

        The declared families exist from ``store init``, so the crawl itself never needs
        admin rights; a family beyond them (an extension, the tests) is created here once
        per table and process.
        """
        extra = families - set(FAMILIES) - self._extra_families[table]
        if not extra:
            return
        with self._errors(table), _quiet():
            _ensure_families(self._admin_table(table), extra)
        self._extra_families[table] |= extra

    def missing_tables(self) -> list[str]:
        """Table ids of this store that do not exist (one small read per table).

        Each read may take :attr:`probe_timeout` seconds in all: an unreachable Bigtable (or
        emulator) is reported then, rather than retried for the client's default ten minutes.
        """
        missing = []
        for table in TABLES:
            try:
                self._table(table).read_rows(
                    ReadRowsQuery(limit=1, row_filter=_KEYS_ONLY),
                    operation_timeout=self.probe_timeout,
                    attempt_timeout=self.probe_timeout,
                )
            except api_exceptions.NotFound:
                missing.append(self.table_id(table))
            except api_exceptions.DeadlineExceeded as exc:
                emulator = os.environ.get(EMULATOR_HOST_ENV)
                where = f" (the emulator at {emulator})" if emulator else ""
                raise StoreError(
                    f"store {self.uri}: no answer from Bigtable{where} within {self.probe_timeout:g}s; is it reachable?"
                ) from exc
            except api_exceptions.GoogleAPIError as exc:
                raise StoreError(f"store {self.uri}: {_first_line(exc)}") from exc
        return missing

    def create_tables(self, families: Sequence[str] = FAMILIES) -> list[str]:
        """Creates the store's tables and column families where missing (idempotent).

        Every family keeps one version (garbage-collection rule), so a set overwrites.

        Returns:
            What was created, as ``table`` or ``table:family`` names.

        Raises:
            StoreError: Bigtable refused (no permission, instance missing, ...).
        """
        from google.cloud.bigtable import column_family

        created: list[str] = []
        for table in TABLES:
            with self._errors(table), _quiet():
                admin = self._admin_table(table)
                try:
                    admin.create(column_families={f: column_family.MaxVersionsGCRule(1) for f in families})
                    created.append(admin.table_id)
                except api_exceptions.AlreadyExists:
                    created.extend(f"{admin.table_id}:{f}" for f in _ensure_families(admin, set(families)))
        return created

    def drop_tables(self) -> list[str]:
        """Deletes the store's tables (all crawl state!). Returns the ids deleted."""
        dropped = []
        for table in TABLES:
            with self._errors(table), _quiet():
                admin = self._admin_table(table)
                try:
                    admin.delete()
                    dropped.append(admin.table_id)
                except api_exceptions.NotFound:
                    pass
        self.close()
        return dropped


# --- helpers ----------------------------------------------------------------------------


def fold_mutations(batch: Sequence[Mutation]) -> list[tuple[bytes, bool, dict[str, bytes]]]:
    """Folds a batch into one ``(key, delete_row_first, cells)`` per key, same effect.

    Bigtable applies the entries of one MutateRows request in no particular order, but
    the mutations of one entry in order: so each key's mutations become one entry. A row
    delete discards the cells set before it; later sets of a cell keep the last value.
    Keys keep the order of their first mutation.

    Raises:
        TypeError: Not a Mutation, or a key, column or value of the wrong type.
        ValueError: An empty key or a malformed column name.
    """
    plans: dict[bytes, tuple[bool, dict[str, bytes]]] = {}
    columns: set[str] = set()  # names already checked: a batch repeats a few names
    for m in batch:
        if not isinstance(m, Mutation):
            raise TypeError(f"expected a Mutation, got {type(m).__name__}")
        k = check_key(m.key)
        delete, cells = plans.get(k, (False, {}))
        if m.delete:
            delete, cells = True, {}
        if m.cells:
            for c, v in m.cells.items():
                if c not in columns:
                    columns.add(check_column(c))
                cells[c] = v if type(v) is bytes else check_value(v)
        plans[k] = (delete, cells)
    return [(k, delete, cells) for k, (delete, cells) in plans.items()]


def _entry_pb(key: bytes, delete: bool, cells: dict[str, bytes], ts: int) -> Any:
    """One MutateRows entry as a plain protobuf message: a row delete, then the sets."""
    entry = _Entry(row_key=key)
    if delete:
        entry.mutations.add().delete_from_row.SetInParent()
    for column, value in cells.items():
        family, _, qualifier = column.partition(":")
        cell = entry.mutations.add().set_cell
        cell.family_name = family
        cell.column_qualifier = qualifier.encode()
        cell.timestamp_micros = ts
        cell.value = value
    return entry


def _code_name(code: int) -> str:
    import grpc

    for status in grpc.StatusCode:
        if status.value[0] == code:
            return status.name
    return f"code {code}"


def _stored_bytes(key: bytes, cells: dict[str, bytes]) -> int:
    """About what Bigtable stores for a row: key, column names, values, timestamps."""
    return len(key) + sum(len(c) + len(v) + 8 for c, v in cells.items())


def _ensure_families(admin_table: Any, families: set[str]) -> list[str]:
    """Creates the missing ones of ``families`` on an existing table; returns them."""
    from google.cloud.bigtable import column_family

    existing = set(admin_table.list_column_families())
    created = []
    for family in sorted(families - existing):
        try:
            admin_table.column_family(family, column_family.MaxVersionsGCRule(1)).create()
            created.append(family)
        except api_exceptions.AlreadyExists:  # another process got there first
            pass
        except api_exceptions.InvalidArgument as exc:
            if "already exists" not in str(exc).lower():
                raise
    return created


@contextmanager
def _quiet() -> Iterator[None]:
    """Silences the clients' "Connecting to Bigtable emulator at ..." warning (one per
    client: noise in every test and every worker)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Connecting to Bigtable emulator", RuntimeWarning)
        yield


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", "") or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
