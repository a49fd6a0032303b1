"""Files on local disk or on any Beam filesystem (``gs://`` …), with one small API.

Local paths use the OS directly (fast, atomic renames); paths with a scheme go through
Beam's ``FileSystems``, imported only then, so that a round whose output folder is in
Cloud Storage needs no local disk between its stages.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from typing import IO


def is_remote(path: str) -> bool:
    return "://" in path


def join(base: str, *parts: str) -> str:
    if is_remote(base):
        return posixpath.join(base, *parts)
    return os.path.join(base, *parts)


def dirname(path: str) -> str:
    return posixpath.dirname(path) if is_remote(path) else os.path.dirname(path)


def _fs():
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def _raw() -> str:
    """Beam's compression type for a file's bytes as they are: by default it gzips what is
    written to (and inflates what is read from) a name ending in .gz, and a WARC file's
    gzip members, which its CDXJ offsets count, are the file."""
    from apache_beam.io.filesystem import CompressionTypes

    return CompressionTypes.UNCOMPRESSED


def open_write(path: str) -> IO[bytes]:
    """A binary file for writing; local parent folders are created."""
    if is_remote(path):
        return _fs().create(path, compression_type=_raw())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return open(path, "wb")


def open_read(path: str) -> IO[bytes]:
    if is_remote(path):
        return _fs().open(path, compression_type=_raw())
    return open(path, "rb")


def write_bytes(path: str, data: bytes | memoryview) -> None:
    """Writes a whole file; locally under a hidden temporary name first, so it appears whole,
    and a writer that dies before the rename leaves no file :func:`list_files` names (a
    staging folder's listing is what a round's commit moves into place)."""
    if is_remote(path):
        with _fs().create(path, compression_type=_raw()) as fh:  # object stores publish an object only when closed
            fh.write(data)
        return
    folder, name = os.path.split(path)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


class PiecewiseFile:
    """A file written in pieces that appears under its name only when closed, as one
    :func:`write_bytes` writes it: locally under a hidden temporary name, renamed on
    :meth:`close`; on an object store the object is published when closed. A writer that
    dies before closing leaves no file under the name (locally a hidden one, which
    :func:`list_files` skips)."""

    def __init__(self, path: str) -> None:
        self.path = path
        if is_remote(path):
            self.tmp = ""
            self.fh: IO[bytes] = _fs().create(path, compression_type=_raw())
        else:
            folder, name = os.path.split(path)
            os.makedirs(folder, exist_ok=True)
            self.tmp = os.path.join(folder, f".{name}.tmp-{os.getpid()}")
            self.fh = open(self.tmp, "wb")

    def write(self, data: bytes) -> None:
        self.fh.write(data)

    def close(self) -> None:
        """Closes the file; it now appears under its name."""
        self.fh.close()
        if self.tmp:
            os.replace(self.tmp, self.path)

    def abandon(self) -> None:
        """Gives the file up: nothing appears under its name, the local temporary is
        deleted. (An object store's upload is left unfinished: closing would publish it.)"""
        if self.tmp:
            self.fh.close()
            os.remove(self.tmp)


def list_files(folder: str) -> list[str]:
    """Full paths of the files directly in ``folder`` (hidden names skipped), sorted."""
    if is_remote(folder):
        pattern = folder.rstrip("/") + "/*"
        matches = _fs().match([pattern])[0].metadata_list
        paths = [m.path for m in matches]
        return sorted(p for p in paths if not posixpath.basename(p).startswith("."))
    if not os.path.isdir(folder):
        return []
    return sorted(
        os.path.join(folder, n)
        for n in os.listdir(folder)
        if not n.startswith(".") and os.path.isfile(os.path.join(folder, n))
    )


def sizes(folder: str) -> dict[str, int]:
    """The files directly in ``folder`` (as :func:`list_files` names them) and their sizes."""
    if is_remote(folder):
        matches = _fs().match([folder.rstrip("/") + "/*"])[0].metadata_list
        return {m.path: m.size_in_bytes for m in matches if not posixpath.basename(m.path).startswith(".")}
    return {path: os.path.getsize(path) for path in list_files(folder)}


def remove(path: str) -> None:
    """Deletes one file; a missing file is fine."""
    if is_remote(path):
        fs = _fs()
        if fs.exists(path):
            fs.delete([path])
        return
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def move(src: str, dst: str) -> None:
    """Moves a file (a rename locally; copy then delete on object stores)."""
    if is_remote(src) or is_remote(dst):
        _fs().rename([src], [dst])
        return
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.replace(src, dst)


def remove_tree(folder: str) -> None:
    """Deletes a folder and everything in it; a missing folder is fine."""
    if is_remote(folder):
        fs = _fs()
        matches = fs.match([folder.rstrip("/") + "/**"])[0].metadata_list
        if matches:
            fs.delete([m.path for m in matches])
        return
    shutil.rmtree(folder, ignore_errors=True)


def ensure_writable(folder: str) -> None:
    """Raises OSError when ``folder`` cannot take files (checked before a round starts)."""
    probe = join(folder, f".write-test-{os.getpid()}")
    write_bytes(probe, b"")
    if is_remote(probe):
        _fs().delete([probe])
    else:
        os.remove(probe)
