"""Batch files: records set aside in bounded files of a round's staging, read back by reference.

A stage whose main input must wait for a side input (no runner can fuse it to the stage that
computes the side input) makes the runner hold every element of that input until the side
input is ready: in the local runners, in memory, for the whole round. Written here instead,
a bundle's records go to files of at most ``max_records`` records and ``max_bytes`` bytes
under ``_staging/round=N/<folder>/``, and only a :class:`BatchRef` per file waits; the
waiting stage reads each file back record by record (:func:`read_batch`).

A file is closed before its reference is given out (an object store publishes an object only
when it is closed), and its name is unique (:func:`~beamcrawl.core.runtime.outputs.part_name`):
a retried bundle writes new files, and the references that reach the reader name only the
files of the bundles the runner kept. The folder is not one of the kinds a round commits: it
goes with the rest of staging, emptied before every attempt and discarded after the commit,
so a rerun never reads a crashed attempt's files.

A file is a sequence of records, each a 4-byte big-endian length and that many bytes; the
reference carries the count and the file's length, and a file that does not match them is an
infrastructure failure (``OSError``: the round fails and is redone).

Records bound for different readers (a shuffle's keys) go to one file together with
:func:`write_spans`: one :class:`SpanRef` per record (its file, offset and length) is what
crosses the shuffle, and each reader reads only its own spans (:func:`read_spans`).
"""

from __future__ import annotations

import errno
import struct
from typing import IO, Iterable, Iterator, NamedTuple

from beamcrawl.core.runtime import files
from beamcrawl.core.runtime.outputs import part_name

__all__ = ["BatchRef", "BatchWriter", "SpanRef", "read_batch", "read_spans", "write_spans"]

_LENGTH = struct.Struct(">I")


class BatchRef(NamedTuple):
    """One closed batch file: its name in the folder, its records and its bytes."""

    name: str
    records: int
    length: int


class BatchWriter:
    """One bundle's batch files in ``folder``: a file is opened on its first record and
    closed once it holds ``max_records`` records or ``max_bytes`` bytes."""

    def __init__(self, folder: str, max_records: int, max_bytes: int) -> None:
        if max_records < 1 or max_bytes < 1:
            raise ValueError("a batch file holds at least one record and one byte")
        self.folder = folder
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.fh: IO[bytes] | None = None
        self.name = ""
        self.records = 0
        self.length = 0

    def append(self, record: bytes) -> BatchRef | None:
        """Appends one record; returns the file's reference when this record filled it."""
        if self.fh is None:
            self.name = part_name(".batch")
            self.fh = files.open_write(files.join(self.folder, self.name))
            self.records = self.length = 0
        self.fh.write(_LENGTH.pack(len(record)))
        self.fh.write(record)
        self.records += 1
        self.length += _LENGTH.size + len(record)
        if self.records >= self.max_records or self.length >= self.max_bytes:
            return self.close()
        return None

    def room(self) -> int:
        """Bytes the next records may take before the file they go to is full."""
        return self.max_bytes - (self.length if self.fh is not None else 0)

    def close(self) -> BatchRef | None:
        """Closes the open file, if any; returns its reference (call before the bundle ends)."""
        if self.fh is None:
            return None
        self.fh.close()
        self.fh = None
        return BatchRef(self.name, self.records, self.length)


def read_batch(folder: str, ref: BatchRef) -> Iterator[bytes]:
    """The records of the batch file ``ref`` names, in the order they were written.

    Raises:
        OSError: The file is missing, short or longer than its reference says.
    """
    with files.open_read(files.join(folder, ref.name)) as fh:
        read = 0
        for _ in range(ref.records):
            head = fh.read(_LENGTH.size)
            if len(head) != _LENGTH.size:
                raise _short(ref, read)
            (n,) = _LENGTH.unpack(head)
            record = fh.read(n)
            if len(record) != n:
                raise _short(ref, read)
            read += _LENGTH.size + n
            yield record
        if read != ref.length or fh.read(1):
            raise OSError(errno.EIO, f"batch file {ref.name} does not match its reference {ref}")


def _short(ref: BatchRef, read: int) -> OSError:
    return OSError(errno.EIO, f"batch file {ref.name} is short: {read} of {ref.length} bytes")


class SpanRef(NamedTuple):
    """One record of a span file: the file's name in the folder, and where the record lies."""

    name: str
    offset: int
    length: int


def write_spans(folder: str, records: Iterable[bytes]) -> list[SpanRef]:
    """Writes ``records`` one after another, as they come, to a new file in ``folder``,
    closes it, and returns each record's :class:`SpanRef`, in order (none, and no file, for
    no records)."""
    refs: list[SpanRef] = []
    fh: IO[bytes] | None = None
    name = part_name(".spans")
    offset = 0
    try:
        for record in records:
            if fh is None:
                fh = files.open_write(files.join(folder, name))
            fh.write(record)
            refs.append(SpanRef(name, offset, len(record)))
            offset += len(record)
    finally:
        if fh is not None:
            fh.close()
    return refs


def read_spans(folder: str, refs: list[SpanRef]) -> Iterator[bytes]:
    """The records ``refs`` name, in their order; each file opened once.

    Raises:
        OSError: A file is missing or shorter than a span says.
    """
    order = sorted(range(len(refs)), key=lambda i: (refs[i].name, refs[i].offset))
    got: dict[int, bytes] = {}
    fh: IO[bytes] | None = None
    name = None
    try:
        for i in order:
            ref = refs[i]
            if ref.name != name:
                if fh is not None:
                    fh.close()
                name = ref.name
                fh = files.open_read(files.join(folder, ref.name))
            assert fh is not None
            fh.seek(ref.offset)
            record = fh.read(ref.length)
            if len(record) != ref.length:
                raise OSError(
                    errno.EIO, f"span file {ref.name} is short: {len(record)} of {ref.length} bytes at {ref.offset}"
                )
            got[i] = record
    finally:
        if fh is not None:
            fh.close()
    for i in range(len(refs)):
        yield got.pop(i)
