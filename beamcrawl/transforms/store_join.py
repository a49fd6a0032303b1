"""The store join: a bucket's sorted keys against one table, by range scan or key set.

The URL-seen and content-seen stages (docs/ARCHITECTURE.md §1, steps 7 and 10) both merge
a bucket of sorted keys against the keys a table already holds. The bucket is one key
range, so either path is one request: scan the range from the bucket's first key to its
last (cost: the stored rows in that span), or read just the bucket's keys (cost: each key
times the store's ``keyset_cost_ratio``). :func:`choose_path` picks the cheaper;
:class:`StoreJoin` reads the rows by the chosen path and counts what it did
(``<namespace>/<prefix>path_scan``, ``…path_keyset``, ``…rows_scanned`` or, keys only,
``…keys_scanned``, and ``…keys_looked_up``).

Governed by the stages' ``path`` argument (``"auto"``, or a forced ``"scan"`` or
``"keyset"``) and the store's row estimate, read once when the pipeline is built.
"""

from __future__ import annotations

from itertools import islice
from operator import itemgetter
from typing import Iterable, Iterator, Literal, Mapping, Sequence

from apache_beam.metrics import Metrics

from beamcrawl.stores.base import Store

__all__ = ["KEY_CHUNK", "JoinPath", "StoreJoin", "choose_path"]

JoinPath = Literal["auto", "scan", "keyset"]
# Stored keys handed on at a time by :meth:`StoreJoin.key_chunks` (some 3 MB of them held).
KEY_CHUNK = 65_536


def choose_path(candidates: int, stored_keys: float, keyset_cost_ratio: float) -> str:
    """``"keyset"`` when reading the candidates' keys costs less than scanning the range.

    Args:
        candidates: Distinct fingerprints offered in the bucket.
        stored_keys: Keys expected in the bucket's range of the seen set.
        keyset_cost_ratio: Cost of one key read by key set, in scanned keys.
    """
    # Either path is one request per bucket, so only the per-key costs differ.
    return "keyset" if candidates * keyset_cost_ratio < stored_keys else "scan"


class StoreJoin:
    """Reads the stored rows of ``table`` among (or around) a bucket's sorted keys.

    Made in a DoFn's ``__init__`` (its counters with it); the DoFn opens the store and
    passes it to :meth:`read`.

    Args:
        table: The store table.
        namespace: The counters' namespace (the stage).
        rows: The table's estimated row count.
        ratio: The store's cost of one key-set key, in scanned rows.
        path: ``"auto"`` (by cost), ``"scan"`` or ``"keyset"``.
        prefix: Put before each counter's name (``"content_"``: one stage, two tables).
        keys_only: Read keys without their cells (the cells come back empty).
    """

    def __init__(
        self,
        table: str,
        namespace: str,
        rows: float,
        ratio: float,
        path: JoinPath,
        *,
        prefix: str = "",
        keys_only: bool = False,
    ) -> None:
        self.table = table
        self.rows = rows
        self.ratio = ratio
        self.path = path
        self.keys_only = keys_only
        scanned = "keys_scanned" if keys_only else "rows_scanned"
        self.scanned = Metrics.counter(namespace, f"{prefix}{scanned}")
        self.looked_up = Metrics.counter(namespace, f"{prefix}keys_looked_up")
        self.path_scan = Metrics.counter(namespace, f"{prefix}path_scan")
        self.path_keyset = Metrics.counter(namespace, f"{prefix}path_keyset")

    def read(self, store: Store, keys: Sequence[bytes], span: float) -> Iterable[tuple[bytes, Mapping[str, bytes]]]:
        """Stored rows among (or around) sorted, equally long ``keys``, in key order.

        ``span`` is the fraction of the table the keys cover: a scan reads about
        ``rows * span`` rows, a key-set read ``len(keys)`` keys. A scan is streamed: read
        it to its end, so that its stream closes and its rows are counted.
        """
        path = self.path
        if path == "auto":
            path = choose_path(len(keys), self.rows * span, self.ratio)
        if path == "keyset":
            self.path_keyset.inc()
            self.looked_up.inc(len(keys))
            found = store.read_keys(self.table, keys, keys_only=self.keys_only)
            return sorted(found.items())
        self.path_scan.inc()
        # Keys have one length: the key with a zero byte added is just past the last.
        return self._scan(store, keys[0], keys[-1] + b"\x00")

    def key_chunks(self, store: Store, keys: Sequence[bytes], span: float) -> Iterator[Sequence[bytes]]:
        """The stored keys among (or around) sorted, equally long ``keys``, as lists of at
        most :data:`KEY_CHUNK` keys, for a join by arrays (``url_seen.seen_mask``): a
        key-set read's keys come in one list, in no order; a scan's in key order, a list at
        a time, so that a long scan is never held whole. Read them to their end."""
        path: str = self.path
        if path == "auto":
            path = choose_path(len(keys), self.rows * span, self.ratio)
        if path == "keyset":
            self.path_keyset.inc()
            self.looked_up.inc(len(keys))
            yield list(store.read_keys(self.table, keys, keys_only=self.keys_only))
            return
        self.path_scan.inc()
        rows = map(itemgetter(0), store.read_range(self.table, keys[0], keys[-1] + b"\x00", keys_only=self.keys_only))
        n = 0
        while chunk := list(islice(rows, KEY_CHUNK)):
            n += len(chunk)
            yield chunk
        self.scanned.inc(n)

    def _scan(self, store: Store, start: bytes, end: bytes) -> Iterator[tuple[bytes, Mapping[str, bytes]]]:
        n = 0
        for key, cells in store.read_range(self.table, start, end, keys_only=self.keys_only):
            n += 1
            yield key, cells
        self.scanned.inc(n)
