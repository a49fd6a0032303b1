"""Spool files: response records written where they are fetched, read back once kept.

The fetch stage serialises each fetched page's response record as it parses the page
(``transforms/set_aside.py``) and appends it, one gzip member, and its request record's
member to a spool file of its bundle under the round's staging (``_staging/round=N/spool/``).
Only the records' place travels on with the page
(:class:`~beamcrawl.schemas.records.Spooled`); the body does not. When the round has
decided which pages are kept, the page store (``transforms/warc_io.py``) copies the kept
responses' members, and their requests', into the round's WARC files byte for byte. The
spool folder is not one of the kinds a round commits: it goes with the rest of staging.

A local spool file is flushed record by record, so it can be read back at once. An object
store publishes an object only when it is closed, at the end of the writing bundle: there,
the pages must cross a stage boundary before the page store reads their records (in the
round, content seen's side input is one).

Files are opened through :mod:`beamcrawl.core.runtime.files`, so a spool on an object store works
as a local one does (a read is then a ranged read of the object).
"""

from __future__ import annotations

import errno
from typing import IO

from beamcrawl.core.runtime import files
from beamcrawl.core.runtime.outputs import RoundOutputs, part_name
from beamcrawl.schemas.records import Spooled

__all__ = ["SPOOL", "SpoolReader", "SpoolWriter"]

SPOOL = "spool"  # the staging folder: never committed
OPEN_FILES = 64  # spool files a reader keeps open at once


class SpoolWriter:
    """One bundle's spool file, created on its first record."""

    def __init__(self, outputs: RoundOutputs) -> None:
        self.outputs = outputs
        self.name = self.path = ""
        self.fh: IO[bytes] | None = None
        self.offset = 0
        self.records = 0
        self.local = True

    def append(self, member: bytes) -> tuple[str, int]:
        """Appends gzip members (a response record's, and its request record's); returns
        ``(file name, offset)`` of the first."""
        if self.fh is None:
            self.name = part_name(".warc.gz")
            self.path = files.join(self.outputs.staged(SPOOL), self.name)
            self.fh = files.open_write(self.path)
            self.local = not files.is_remote(self.path)
            self.offset = 0
        offset = self.offset
        self.fh.write(member)
        if self.local:
            self.fh.flush()  # readable at once, even by a page store fused to this stage
        self.offset += len(member)
        self.records += 1
        return self.name, offset

    def close(self) -> None:
        """Closes the file (an object store publishes it now): call before its pages leave
        the bundle's stage, i.e. in ``finish_bundle``."""
        if self.fh is not None:
            self.fh.close()
            self.fh = None


class SpoolReader:
    """Reads spooled members back from a round's spool folder, keeping the last few files
    open."""

    def __init__(self, outputs: RoundOutputs, max_open: int = OPEN_FILES) -> None:
        self.folder = outputs.staged(SPOOL)
        self.max_open = max_open
        self.open: dict[str, IO[bytes]] = {}

    def read(self, spooled: Spooled) -> bytes:
        """The members at ``spooled``: the response record's, then its request record's
        when that was spooled too.

        Raises:
            OSError: The spool file is missing or short (an infrastructure failure: the
                round fails and is redone, as for any file it cannot write).
        """
        fh = self.open.pop(spooled.name, None)
        if fh is None:
            if len(self.open) >= self.max_open:
                oldest = next(iter(self.open))
                self.open.pop(oldest).close()
            fh = files.open_read(files.join(self.folder, spooled.name))
        self.open[spooled.name] = fh  # most recently used last
        fh.seek(spooled.offset)
        length = spooled.length + spooled.request_length
        data = fh.read(length)
        if len(data) != length:
            raise OSError(
                errno.EIO,
                f"spool file {spooled.name} is short: {len(data)} of {length} bytes at {spooled.offset}",
            )
        return data

    def close(self) -> None:
        for fh in self.open.values():
            fh.close()
        self.open.clear()
