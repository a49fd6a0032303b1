"""The store interface: tables of rows sorted by a byte key, shaped like Bigtable.

Every transform talks to state through this small interface, so the embedded backend
(SQLite, one machine) and the Cloud Bigtable backend are interchangeable. A row is a key
(bytes) and a set of cells, each named ``"family:qualifier"`` and holding bytes. Reads are
by key range (sorted, optionally keys only) or by a set of keys in one batched request;
writes are batches of mutations applied in order. There is no per-key lookup method on
purpose: callers batch.

Tables (DESIGN.md §2):
    urls      the seen set and URL state, keyed by the 8-byte big-endian URL fingerprint
    frontier  queued URLs, keyed by 8-byte due time (ms since epoch) + 8-byte fingerprint
    hosts     host records (delay, last fetch, robots cache), keyed by host name
    policies  operator policies per host, keyed by host name
    meta      crawl-wide rows: the round counter and the round lease
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, TypeVar

TABLES = ("urls", "frontier", "hosts", "policies", "meta")

Cells = Mapping[str, bytes]
Row = tuple[bytes, dict[str, bytes]]

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
    def read_keys(
        self, table: str, keys: Iterable[bytes], *, keys_only: bool = False
    ) -> dict[bytes, dict[str, bytes]]:
        """Reads a set of keys in one batched request; keys not stored are absent."""

    @abc.abstractmethod
    def mutate(self, table: str, mutations: Iterable[Mutation]) -> None:
        """Applies mutations in order, in batches; atomic per row."""

    @abc.abstractmethod
    def check_and_set(
        self, table: str, key: bytes, column: str, expected: bytes | None, new: bytes | None
    ) -> bool:
        """Sets ``column`` of row ``key`` to ``new`` only if it now holds ``expected``.

        ``expected=None`` means the cell must be absent; ``new=None`` deletes the cell.
        Returns whether the write happened. Used for the round lease.
        """

    def close(self) -> None:
        """Releases connections."""

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(uri: str) -> Store:
    """Opens the store named by ``uri``.

    ``sqlite:///path/to/file.sqlite`` or a plain directory or file path opens the embedded
    store; ``bigtable://PROJECT/INSTANCE[/TABLE_PREFIX]`` opens Cloud Bigtable.
    """
    if uri.startswith("bigtable://"):
        try:
            from beamcrawl.stores.bigtable import BigtableStore
        except ImportError as exc:  # the backend lands with its own issue
            raise StoreError(f"bigtable store is not available: {exc}") from exc
        return BigtableStore.from_uri(uri)
    from beamcrawl.stores.embedded import EmbeddedStore

    return EmbeddedStore.from_uri(uri)
