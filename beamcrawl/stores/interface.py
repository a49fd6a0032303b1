"""The store interface: tables of rows sorted by a byte key, shaped like Bigtable.

Every transform talks to state through this small interface, so the embedded backend
(SQLite, one machine) and the Cloud Bigtable backend are interchangeable. A row is a key
(bytes) and a set of cells, each named ``"family:qualifier"`` and holding bytes. Reads are
by key range (sorted, optionally keys only) or by a set of keys in one batched request;
writes are batches of mutations applied in order. There is no per-key lookup method on
purpose: callers batch.

Tables (docs/ARCHITECTURE.md §2):
    urls      the seen set and URL state, keyed by the 8-byte big-endian URL fingerprint
    frontier  queued URLs, keyed by 8-byte due time (ms since epoch) + 8-byte fingerprint
    hosts     host records (delay, last fetch, robots cache), keyed by host name
    policies  operator policies per host, keyed by host name
    meta      crawl-wide rows: the round counter, the round lease, the simhash tables' layout
    domains   per registered domain budget state (linking domains, pages used, known host
              names, seed credit), keyed by the domain name
    content   the content-seen set: where the page with a payload is kept, keyed by the
              8-byte big-endian payload checksum (transforms/content_seen.py)
    simhash   kept pages' simhashes in permuted tables (ten or twenty, as the store recorded
              in meta: state/simhash_layout.py), keyed by a table byte and the leading bits
              of the permuted fingerprint (core/content/textfp.py)
"""

from __future__ import annotations

import abc
import itertools
import operator
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Sequence, TypeVar

TABLES = ("urls", "frontier", "hosts", "policies", "meta", "domains", "content", "simhash")

# Column families in use (the part of a cell name before the colon): ``r`` a record as
# JSON (hosts, policies) or in schemas/cells.py's binary format (frontier), ``u`` URL state
# in the seen set, ``m`` crawl-wide meta, ``d`` a domain's budget state, ``c`` a
# content-seen row, ``s`` the originals in a simhash table row.
# Backends with declared families (Bigtable) create these up front; a new family used by
# the crawler belongs here, so `beamcrawl store init` creates it.
FAMILIES = ("r", "u", "m", "d", "c", "s")

# estimate_rows counts up to this many keys exactly before extrapolating.
ESTIMATE_EXACT_ROWS = 20_000

Cells = Mapping[str, bytes]
Row = tuple[bytes, dict[str, bytes]]
Cell = tuple[bytes, str, bytes]  # (row key, column, value): one cell set by Store.write_cells
_cell_key = operator.itemgetter(0)

_S = TypeVar("_S", bound="Store")


class StoreError(Exception):
    """The store cannot be opened or used; the message names the problem."""


@dataclass(frozen=True)
class Mutation:
    """One row mutation.

    ``cells`` set (or overwrite) the named cells and leave the others as they are, like
    Bigtable's SetCell. ``delete=True`` deletes the whole row first (then sets ``cells``
    if any are given).
    """

    key: bytes
    cells: Mapping[str, bytes] | None = None
    delete: bool = False

    @classmethod
    def set(cls, key: bytes, cells: Mapping[str, bytes]) -> "Mutation":
        return cls(key=key, cells=dict(cells))

    @classmethod
    def delete_row(cls, key: bytes) -> "Mutation":
        return cls(key=key, delete=True)


class Store(abc.ABC):
    """A Bigtable-shaped store. Implementations must be safe to open in several processes."""

    uri: str
    # What reading one key by key set (read_keys) costs, in keys read by a keys-only range
    # scan. Batch joins use it to choose between scanning a key range and reading just
    # the keys they need (transforms/url_seen.py).
    keyset_cost_ratio: float = 4.0
    # The simhash tables a new store of this kind keeps for near copies (20 or 10: the
    # layouts of core/content/textfp.py). Each table is a row a stored page; fewer tables
    # mean fewer rows to write and more fingerprints read a lookup, which a store sized for
    # billions of pages cannot afford. A store keeps the layout its first round recorded
    # (state/simhash_layout.py).
    simhash_tables: int = 20

    @abc.abstractmethod
    def read_range(
        self,
        table: str,
        start: bytes | None = None,
        end: bytes | None = None,
        *,
        keys_only: bool = False,
        limit: int | None = None,
    ) -> Iterator[Row]:
        """Yields rows with ``start <= key < end`` in key order (None = unbounded).

        With ``keys_only`` the cells dict is empty (Bigtable's strip-value filter).
        """

    @abc.abstractmethod
    def read_keys(self, table: str, keys: Iterable[bytes], *, keys_only: bool = False) -> dict[bytes, dict[str, bytes]]:
        """Reads a set of keys in one batched request; keys not stored are absent."""

    @abc.abstractmethod
    def mutate(self, table: str, mutations: Iterable[Mutation]) -> None:
        """Applies mutations in order, in batches; atomic per row."""

    def write_cells(self, table: str, cells: Sequence[Cell]) -> None:
        """Sets each ``(key, column, value)`` cell, as ``Mutation.set`` of it would, in order
        (a cell given twice keeps the later value). Meant for a sorted run; a row's cells
        are atomic together only where they are adjacent.

        For rows written whole in great numbers (a simhash-table row a table a new original),
        where a Mutation and a dict a row cost more than the write. The default makes one
        Mutation of each run of one key's cells and applies them with :meth:`mutate` (on
        Bigtable, MutateRows requests of neighbouring keys); a backend that can write
        cells as they are overrides it.

        Raises:
            ValueError: Unknown table, empty key or malformed column name.
            TypeError: A key, column or value has the wrong type, or a cell is not a triple.
        """
        try:
            runs = [Mutation(key, {c: v for _, c, v in run}) for key, run in itertools.groupby(cells, key=_cell_key)]
        except (TypeError, ValueError, IndexError):
            raise TypeError("cells are (key, column, value) triples") from None
        self.mutate(table, runs)

    @abc.abstractmethod
    def check_and_set(self, table: str, key: bytes, column: str, expected: bytes | None, new: bytes | None) -> bool:
        """Sets ``column`` of row ``key`` to ``new`` only if it now holds ``expected``.

        ``expected=None`` means the cell must be absent; ``new=None`` deletes the cell.
        Returns whether the write happened. Used for the round lease.
        """

    def count_rows(self, table: str) -> int:
        """How many rows ``table`` holds, exactly.

        The default counts the keys of one keys-only scan, in the client: linear in the
        table, what Bigtable offers (it has no count; its server strips the values, the
        client still receives every key). Backends that can count where the rows are
        override it.

        Raises:
            ValueError: Unknown table.
        """
        check_table(table)
        return sum(1 for _ in self.read_range(table, keys_only=True))

    def report_rows(self, table: str) -> tuple[int, bool]:
        """How many rows ``table`` holds, for a round's report, and whether that is exact.

        Asked after every round (the frontier left), so it must not cost what the table
        costs to read: the default is the exact :meth:`count_rows`, for backends that count
        where the rows are; a backend whose count is a scan through the client (Bigtable)
        gives its :meth:`estimate_rows` for a large table instead.

        Raises:
            ValueError: Unknown table.
        """
        return self.count_rows(table), True

    def estimate_rows(self, table: str) -> int:
        """A cheap estimate of how many rows ``table`` holds (for sizing batch joins).

        The default counts keys with one keys-only scan of at most
        :data:`ESTIMATE_EXACT_ROWS` rows, so it is exact for small tables. Past that it
        extrapolates from how far into the 64-bit key space the last counted key lies,
        which is accurate for keys that are uniform over that space (the seen set's
        fingerprints) and only a rough guess for other tables. Backends with a cheaper
        source (Bigtable's SampleRowKeys) override it.

        Raises:
            ValueError: Unknown table.
        """
        check_table(table)
        counted = 0
        last = b""
        for last, _ in self.read_range(table, keys_only=True, limit=ESTIMATE_EXACT_ROWS):  # noqa: B007 (read after)
            counted += 1
        if counted < ESTIMATE_EXACT_ROWS:
            return counted
        position = int.from_bytes(last[:8].ljust(8, b"\x00"), "big") + 1
        return max(counted, round(counted * (1 << 64) / position))

    def split_keys(self, table: str, start: bytes, end: bytes, rows_per_part: int) -> list[bytes]:
        """Keys that cut ``[start, end)`` into parts of about ``rows_per_part`` rows, so a
        long scan can run as several, on several workers.

        Returned sorted and strictly inside the range (neither bound), so the parts
        ``[start, k1), [k1, k2) … [kn, end)`` hold every row of the range exactly once;
        an empty list for a range of at most ``rows_per_part`` rows. An empty ``end``
        means no end, as in :meth:`read_range`. The sizes are a hint, not a promise: a
        backend that samples (Bigtable) gives its samples' spacing.

        The default walks the range's keys in the client, keys only (a backend that can
        walk where the rows are overrides it).

        Raises:
            ValueError: Unknown table, or ``rows_per_part`` below 1.
        """
        check_table(table)
        if rows_per_part < 1:
            raise ValueError(f"rows_per_part must be >= 1, got {rows_per_part}")
        splits: list[bytes] = []
        for i, (key, _) in enumerate(self.read_range(table, start, end or None, keys_only=True)):
            if i and i % rows_per_part == 0:
                splits.append(key)
        return splits

    def close(self) -> None:  # noqa: B027 (a backend with nothing to release need not override it)
        """Releases connections."""

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- argument checks shared by backends ------------------------------------------------


def check_table(table: object) -> str:
    """Returns ``table`` if it is one of :data:`TABLES`.

    Raises:
        ValueError: Unknown table (the message names it and the known ones).
    """
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")
    return table


def check_key(key: object) -> bytes:
    """Returns ``key`` as bytes.

    Raises:
        TypeError: Not bytes-like (a str key would sort apart from every bytes key).
        ValueError: Empty (as in Bigtable).
    """
    if type(key) is not bytes:
        if not isinstance(key, (bytes, bytearray, memoryview)):
            raise TypeError(f"row keys are bytes, got {type(key).__name__}")
        key = bytes(key)
    if not key:
        raise ValueError("row keys must not be empty")
    return key


def check_bound(bound: object) -> bytes:
    """Returns a range bound as bytes.

    Raises:
        TypeError: Not bytes-like.
    """
    if not isinstance(bound, (bytes, bytearray, memoryview)):
        raise TypeError(f"range bounds are bytes, got {type(bound).__name__}")
    return bytes(bound)


def check_column(column: object) -> str:
    """Returns ``column`` if it is a ``"family:qualifier"`` str with a non-empty family.

    Raises:
        TypeError: Not a str.
        ValueError: No colon, or an empty family.
    """
    if type(column) is not str:
        raise TypeError(f"column names are str, got {type(column).__name__}")
    family, sep, _ = column.partition(":")
    if not sep or not family:
        raise ValueError(f"column {column!r} is not 'family:qualifier'")
    return column


def check_value(value: object) -> bytes:
    """Returns a cell value as bytes.

    Raises:
        TypeError: Not bytes-like.
    """
    if type(value) is not bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"cell values are bytes, got {type(value).__name__}")
        value = bytes(value)
    return value
