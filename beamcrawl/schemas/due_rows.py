"""A host's due frontier rows as the cells the store holds: what waits between the select
and slot assignment.

A deep frontier makes the round's start its memory peak: every due row waits in the runner
between the select, the domain budgets and slot assignment's join by host, and a runner
holds a grouping's values decoded (the in-process FnApiRunner keeps them as objects until the
group is read, then encodes the whole group again). A decoded ``FrontierEntry`` is some 430
bytes and its pickle in a batch about 100; its stored cell (``schemas/cells.py``) about 150,
and no work to make: the select reads only a cell's host (:func:`cells.peek_frontier`) and
slot assignment decodes each row once, where it ranks the host's URLs. So the rows travel
as :class:`DueRows`, one ``bytes`` value per host and chunk of the scan: its length-prefixed
cells, compressed (zlib at level 1: a host's rows share their host name, URL prefixes and
most field values, and come to some 26 bytes a row, a quarter of their pickle), which a
runner decodes and encodes by copying. A runner copies a grouping's encoded bytes more than
once when it hands the group on (the in-process runner: its buffer, then the worker's
copies), so their size is what the round's start peaks at.

A plan's URLs cross to their fetch shard the same way (``assign_slots.packed_plan``): a shard
holds all its hosts' plans while most wait for a place among the hosts in flight. There each
URL is decoded only when the host's crawl reaches it (:class:`EntryCursor`): a loop crawls a
thousand hosts at once, each with up to a window's worth of URLs, and when the window ends
the URLs not reached go back to the frontier as the rows they came as.

A row that does not decode when it is finally read is one row set aside (:meth:`DueRows.decode`
gives it back with its reason), never its host's others.
"""

from __future__ import annotations

import itertools
import struct
from typing import Any, Iterable, Iterator

from zlib_ng import zlib_ng

from beamcrawl.schemas import cells as binary
from beamcrawl.schemas.records import JSON_CELL, FrontierEntry, frontier_key

__all__ = ["DueRows", "EntryCursor", "due_rows_by_host", "entries_of"]

_LENGTH = struct.Struct("<I")
# zlib's fastest level: 0.24 µs a row to compress and 0.11 to expand, 151 to 26 bytes a row
# (levels 3 and 6: 24 and 22 bytes, for five times the time), measured on 100,000 due rows of
# a stored crawl; what it does to a round's start: bench/round_start.py.
LEVEL = 1


class DueRows:
    """Frontier rows as their stored cells (binary or JSON), one compressed ``bytes`` for
    all of them (``blob``).

    Iterating gives the rows as :class:`FrontierEntry`, decoded then (a row that does not
    decode raises: use :meth:`decode` to set such rows aside one by one).
    """

    __slots__ = ("blob", "count")

    def __init__(self, blob: bytes = b"", count: int = 0) -> None:
        self.blob = blob
        self.count = count

    @classmethod
    def of_cells(cls, cells: list[bytes]) -> DueRows:
        """The rows of these stored cells (each a frontier row's ``r:json`` value)."""
        pack = _LENGTH.pack
        joined = b"".join(itertools.chain.from_iterable((pack(len(c)), c) for c in cells))
        return cls(zlib_ng.compress(joined, LEVEL), len(cells))

    @classmethod
    def of_entries(cls, entries: Iterable[FrontierEntry]) -> DueRows:
        """The rows of these entries, each as the cell the store would hold."""
        return cls.of_cells([entry.to_cells()[JSON_CELL] for entry in entries])

    def cells(self) -> Iterator[bytes]:
        """Each row's cell, in order."""
        if not self.count:
            return
        blob, at, unpack = zlib_ng.decompress(self.blob), 0, _LENGTH.unpack_from
        view = memoryview(blob)
        while at < len(blob):
            (n,) = unpack(view, at)
            at += 4
            yield blob[at : at + n]
            at += n

    def decode(self) -> tuple[list[FrontierEntry], list[tuple[str, Exception]]]:
        """The rows that decode, and for each that does not, its frontier key (hex, as the
        commit names rows; its cell's start where even that is unreadable) and why."""
        good: list[FrontierEntry] = []
        bad: list[tuple[str, Exception]] = []
        from_cells = FrontierEntry.from_cells
        for raw in self.cells():
            try:
                good.append(from_cells({JSON_CELL: raw}))
            except Exception as exc:
                bad.append((_row_name(raw), exc))
        return good, bad

    def __iter__(self) -> Iterator[FrontierEntry]:
        from_cells = FrontierEntry.from_cells
        return (from_cells({JSON_CELL: raw}) for raw in self.cells())

    def __len__(self) -> int:
        return self.count

    def __eq__(self, other: object) -> bool:
        return type(other) is DueRows and other.blob == self.blob and other.count == self.count

    def __hash__(self) -> int:
        return hash((self.blob, self.count))

    def __repr__(self) -> str:
        return f"DueRows({self.count} rows, {len(self.blob)} bytes)"

    def __reduce__(self) -> tuple[Any, ...]:
        return DueRows, (self.blob, self.count)


class EntryCursor:
    """A host plan's URLs taken in order as its crawl reaches them, each decoded only then.

    ``entries`` is a :class:`DueRows` (a plan as it crossed to its fetch shard) or a list of
    entries. Iterating takes the next entry; a row that does not decode raises, taken (the
    rest goes on without it). :meth:`rest` gives what was not taken as it came: a window's end
    defers the rows of a thousand hosts at once, and the fetch stage only counts them.
    ``len`` is how many are left.
    """

    __slots__ = ("_source", "_taken", "_cells", "_last")

    def __init__(self, entries: DueRows | list[FrontierEntry]) -> None:
        self._source = entries
        self._taken = 0
        self._cells: Iterator[bytes] | None = None  # the rows' cells, once the first is taken
        self._last = b""  # the cell of the entry taken last

    def __iter__(self) -> EntryCursor:
        return self

    def __next__(self) -> FrontierEntry:
        source = self._source
        if not isinstance(source, DueRows):
            if self._taken >= len(source):
                raise StopIteration
            self._taken += 1
            return source[self._taken - 1]
        if self._cells is None:
            self._cells = source.cells()
        raw = next(self._cells)  # StopIteration at the end
        self._taken += 1
        self._last = raw
        return FrontierEntry.from_cells({JSON_CELL: raw})

    def __len__(self) -> int:
        return len(self._source) - self._taken

    def rest(self, with_last: bool = False) -> DueRows | list[FrontierEntry]:
        """The entries not taken yet, in order (``with_last``: the last one taken first, as
        it was given back unfetched), as rows the way they came, never decoded here; they
        are given out, so nothing is left to take after it."""
        source = self._source
        start = self._taken - 1 if with_last and self._taken else self._taken
        self._taken = len(source)
        if not isinstance(source, DueRows):
            return list(source[start:])
        cells, self._cells = self._cells, iter(())
        if start == 0:
            return source
        rest = [self._last] if with_last else []
        rest += cells or ()
        return DueRows.of_cells(rest)


def _row_name(raw: bytes) -> str:
    try:
        _host, due_ms, fp = binary.peek_frontier(raw)
        return frontier_key(due_ms, fp).hex()
    except binary.CellError:
        return raw[:64].hex()


def due_rows_by_host(rows: Iterable[tuple[str, bytes]]) -> Iterator[tuple[str, DueRows]]:
    """``(host, DueRows)`` per host of ``(host, cell)`` pairs, hosts in order of first
    appearance."""
    hosts: dict[str, list[bytes]] = {}
    for host, cell in rows:
        held = hosts.get(host)
        if held is None:
            hosts[host] = held = []
        held.append(cell)
    return ((host, DueRows.of_cells(held)) for host, held in hosts.items())


def entries_of(chunks: Iterable[Iterable[FrontierEntry]], bad: list[tuple[str, Exception]]) -> list[FrontierEntry]:
    """The entries of a host's chunks of due rows (:class:`DueRows`, or lists of entries),
    the rows that do not decode appended to ``bad``."""
    entries: list[FrontierEntry] = []
    for chunk in chunks:
        if type(chunk) is DueRows:
            good, failed = chunk.decode()
            entries.extend(good)
            bad.extend(failed)
        else:
            entries.extend(chunk)
    return entries
