"""A round's small staged files merged into fewer, larger ones before the round commits.

A writer opens a file per bundle. In process and on Flink a round is one bundle per writer
task, but Dataflow splits a batch stage into many work items, so a round may stage many
small files. :func:`compact_round` runs once, at the end of a round and before its commit
marker (a crash in it redoes the round, as any crash before the marker does), and merges,
per kind, runs of files smaller than a fraction of the kind's target size into files no
larger than the target:

- WARC: a merged file starts with a ``warcinfo`` record of its own (WARC 1.1 §6.1: its
  ``WARC-Filename`` names the file that holds it; the other fields are the first source's),
  then each source's records after its ``warcinfo``, byte for byte (each record is its own
  gzip member, so members concatenate). Its CDXJ index is the sources' lines, each offset
  shifted by where its source's records now start and its ``filename`` the merged file's,
  sorted as the writer sorts them (:mod:`cdxj`). A source is merged only if it reads whole:
  every gzip member inflates, the first is a ``warcinfo``, and every index line names the
  file and selects whole members after it; else it and its index are left as they are.
- Parquet (``pages/``, ``links/``, ``errors/``): parts of one schema are rewritten into one
  file, their rows in order; a part that does not read is left as it is.
- The page events' ``blob`` (``<WARC file relative to OUT>@<offset>``) of a record whose
  file was merged is rewritten to its new place, in every ``pages/`` part, merged or not.

Files go through :mod:`beamcrawl.core.runtime.files`, so a gs:// output folder works as a
local one. A source is deleted only once the merged file is complete under its final
staged name (a crash point, ``compact.merged``, sits between the two).
"""

from __future__ import annotations

import io
import json
import re
import zlib
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from warcio.warcwriter import WARCWriter

from beamcrawl.core.archive import cdxj
from beamcrawl.core.runtime import files
from beamcrawl.core.runtime.faults import crash_point
from beamcrawl.core.runtime.outputs import RoundOutputs, part_name

__all__ = ["SMALL_FRACTION", "Compaction", "compact_parquet", "compact_round", "compact_warc", "pack_groups"]

# A file smaller than its kind's target divided by this is small: merged with others.
SMALL_FRACTION = 4
_READ_BLOCK = 1 << 20
_INFLATE_CHUNK = 1 << 16
_WARC_SUFFIX = ".warc.gz"
_LINE = re.compile(rb"(.*?) (\d{14}) (\{.*\})\Z", re.S)

# A warc file's records moved into a merged file: old name relative to OUT → (new name, shift).
Moves = dict[str, tuple[str, int]]


@dataclass
class Compaction:
    """Files of a kind before and after compaction."""

    before: int
    after: int


def pack_groups(
    items: list[tuple[str, int, int]], target: int, small: int, max_count: int | None = None
) -> list[list[str]]:
    """Groups of two or more small items to merge, each group's sizes summing to at most
    ``target`` (and, with ``max_count``, its counts to at most that).

    Args:
        items: ``(name, size, count)`` in the order their contents are to be kept.
        target: The largest size of a merged file.
        small: Items of this size or more are left alone.
        max_count: The most entries (index lines, rows) a merged file may hold.
    """
    groups: list[list[str]] = []
    group: list[str] = []
    size = count = 0
    for name, item_size, item_count in items:
        if item_size >= small or item_size > target or (max_count is not None and item_count > max_count):
            continue
        if group and (size + item_size > target or (max_count is not None and count + item_count > max_count)):
            groups.append(group)
            group, size, count = [], 0, 0
        group.append(name)
        size += item_size
        count += item_count
    groups.append(group)
    return [g for g in groups if len(g) > 1]


# --- WARC ---------------------------------------------------------------------------------------


class _WarcSource(NamedTuple):
    warc: str
    cdxj: str
    rel: str  # the name the index lines (and page events) give the file
    size: int
    head_len: int  # its warcinfo member's length
    info: bytes  # its warcinfo record, inflated
    lines: int


def _members(path: str) -> tuple[list[int], int, bytes]:
    """Where each gzip member of a file starts, the file's size, and its first member
    inflated (up to 64 KiB). Raises ValueError or zlib.error when the file is not whole
    gzip members."""
    starts: list[int] = []
    first = bytearray()
    pos = fed = 0
    inflater: Any = None
    data = b""
    with files.open_read(path) as fh:
        while True:
            if not data:
                data = fh.read(_READ_BLOCK)
                if not data:
                    break
            if inflater is None:
                starts.append(pos)
                inflater, fed = zlib.decompressobj(31), 0
            n = len(data)
            out = inflater.decompress(data, _INFLATE_CHUNK)
            if len(starts) == 1 and len(first) < 65536:
                first += out
            if inflater.eof:
                rest = inflater.unused_data
                pos += fed + n - len(rest)
                data, inflater = rest, None
            else:
                tail = inflater.unconsumed_tail
                fed += n - len(tail)
                data = tail
                while not data and not inflater.eof:  # output held back by the chunk limit
                    out = inflater.decompress(b"", _INFLATE_CHUNK)
                    if len(starts) == 1 and len(first) < 65536:
                        first += out
                    if not out:
                        break
                if inflater.eof:
                    pos += fed
                    inflater = None
    if inflater is not None or not starts:
        raise ValueError(f"{path}: not whole gzip members")
    return starts, pos, bytes(first)


def _parse_line(line: bytes) -> tuple[bytes, bytes, dict[str, Any]]:
    match = _LINE.match(line)
    if match is None:
        raise ValueError("not a CDXJ line")
    fields = json.loads(match.group(3))
    if not isinstance(fields, dict):
        raise ValueError("not a CDXJ line")
    return match.group(1), match.group(2), fields


def _index_lines(path: str) -> list[bytes]:
    with files.open_read(path) as fh:
        return [line for line in fh.read().split(b"\n") if line]


def _read_source(warc: str, index: str, rel: str) -> _WarcSource | None:
    """The source if it reads whole and its index points at its members, else None."""
    try:
        starts, size, info = _members(warc)
        if b"\r\nWARC-Type: warcinfo\r\n" not in info.split(b"\r\n\r\n", 1)[0] + b"\r\n":
            return None
        head_len = starts[1] if len(starts) > 1 else size
        bounds = set(starts) | {size}
        lines = _index_lines(index)
        for line in lines:
            _, _, fields = _parse_line(line)
            offset, length = int(fields["offset"]), int(fields["length"])
            if fields["filename"] != rel or offset < head_len or offset not in bounds or offset + length not in bounds:
                return None
        return _WarcSource(warc, index, rel, size, head_len, info, len(lines))
    except (OSError, ValueError, KeyError, TypeError, zlib.error):
        return None


def _warcinfo(info: bytes, filename: str) -> bytes:
    """A warcinfo record (one gzip member) naming ``filename``, with ``info``'s fields."""
    head, _, payload = info.partition(b"\r\n\r\n")
    length = 0
    for header in head.split(b"\r\n")[1:]:
        key, _, number = header.partition(b":")
        if key.strip().lower() == b"content-length":
            length = int(number.strip())
    fields: dict[str, str] = {}
    for raw in payload[:length].decode("utf-8", "replace").split("\r\n"):
        name, sep, value = raw.partition(":")
        if sep and name.strip():
            fields.setdefault(name.strip(), value.strip())
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True, warc_version="1.1")
    writer.write_record(writer.create_warcinfo_record(filename, fields))
    return buf.getvalue()


def _merge_warcs(sources: list[_WarcSource], outputs: RoundOutputs) -> Moves:
    name = part_name(_WARC_SUFFIX)
    rel = f"{outputs.final_rel('warc')}/{name}"
    head = _warcinfo(sources[0].info, name)
    out = files.PiecewiseFile(files.join(outputs.staged("warc"), name))
    index = cdxj.SortedIndex()
    moves: Moves = {}
    pos = len(head)
    try:
        out.write(head)
        for src in sources:
            shift = pos - src.head_len
            with files.open_read(src.warc) as fh:
                skip = src.head_len
                while data := fh.read(_READ_BLOCK):
                    if skip:
                        cut, skip = min(skip, len(data)), skip - min(skip, len(data))
                        data = data[cut:]
                    out.write(data)
            for line in _index_lines(src.cdxj):
                key, stamp, fields = _parse_line(line)
                offset = int(fields["offset"]) + shift
                fields["offset"], fields["filename"] = str(offset), rel
                index.add((key, stamp, offset, json.dumps(fields).encode("utf-8")))
            moves[src.rel] = (rel, shift)
            pos += src.size - src.head_len
    except BaseException:
        out.abandon()
        index.close()
        raise
    out.close()
    index.write(files.join(outputs.staged("cdxj"), f"{name[: -len(_WARC_SUFFIX)]}.cdxj"))
    crash_point("compact.merged")
    for src in sources:
        files.remove(src.warc)
        files.remove(src.cdxj)
    return moves


def _stem(name: str) -> str:
    return name[: -len(_WARC_SUFFIX)]


def compact_warc(
    outputs: RoundOutputs, target: int, small: int | None = None, max_index: int | None = None
) -> tuple[Compaction, Compaction, Moves]:
    """Merges the round's small staged WARC files (and their indexes); returns the WARC
    and CDXJ files before and after, and where merged records moved."""
    small = target // SMALL_FRACTION if small is None else small
    warcs = files.sizes(outputs.staged("warc"))
    indexes = set(files.list_files(outputs.staged("cdxj")))
    candidates: list[tuple[str, int, int]] = []
    for path, size in sorted(warcs.items()):
        base = path.rstrip("/").rsplit("/", 1)[-1]
        if base.endswith(_WARC_SUFFIX) and files.join(outputs.staged("cdxj"), f"{_stem(base)}.cdxj") in indexes:
            candidates.append((path, size, 0))
    # Only a file that could be merged by its size is read (a lone small file is not).
    sources: dict[str, _WarcSource] = {}
    for group in pack_groups(candidates, target, small):
        for path in group:
            base = path.rstrip("/").rsplit("/", 1)[-1]
            index = files.join(outputs.staged("cdxj"), f"{_stem(base)}.cdxj")
            src = _read_source(path, index, f"{outputs.final_rel('warc')}/{base}")
            if src is not None:
                sources[path] = src
    groups = pack_groups([(p, s.size, s.lines) for p, s in sources.items()], target, small, max_index)
    moves: Moves = {}
    for group in groups:
        moves.update(_merge_warcs([sources[p] for p in group], outputs))
    merged = sum(len(g) - 1 for g in groups)
    return Compaction(len(warcs), len(warcs) - merged), Compaction(len(indexes), len(indexes) - merged), moves


# --- Parquet ------------------------------------------------------------------------------------


def _moved_blob(moves: Moves) -> Callable[[str | None], str | None]:
    def moved(blob: str | None) -> str | None:
        if not blob:
            return blob
        rel, sep, offset = blob.rpartition("@")
        if not sep or rel not in moves or not offset.isdigit():
            return blob
        new, shift = moves[rel]
        return f"{new}@{int(offset) + shift}"

    return moved


def _read_table(path: str) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with files.open_read(path) as fh:
        return pq.read_table(pa.BufferReader(fh.read()))


def _footer(path: str) -> Any:
    """A Parquet part's metadata (its footer, read without the rest where the file seeks)."""
    import pyarrow.parquet as pq

    with files.open_read(path) as fh:
        return pq.ParquetFile(fh if fh.seekable() else io.BytesIO(fh.read())).metadata


def _footers_read(folder: str) -> bool:
    """Whether every part in ``folder`` has a footer that reads."""
    for path in files.list_files(folder):
        try:
            _footer(path)
        except Exception:
            return False
    return True


def _reblobbed(table: Any, moves: Moves) -> Any:
    """``table`` with its ``blob`` column's moved records pointed at (itself if none moved)."""
    import pyarrow as pa

    if not moves or "blob" not in table.column_names:
        return table
    old = table.column("blob").to_pylist()
    new = list(map(_moved_blob(moves), old))
    if new == old:
        return table
    at = table.column_names.index("blob")
    return table.set_column(at, table.schema.field(at), pa.array(new, type=table.schema.field(at).type))


def _write(tables: list[Any], schema: Any, path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()  # a merged part is bounded (the target); any filesystem takes bytes
    with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
        for table in tables:
            writer.write_table(table)
    files.write_bytes(path, sink.getvalue())


def compact_parquet(
    folder: str, target: int, small: int | None = None, max_rows: int | None = None, moves: Moves | None = None
) -> Compaction:
    """Merges a folder's small Parquet parts of one schema, rows in order, and points their
    ``blob`` column (and any other part's) at records ``moves`` says were moved; returns the
    files before and after."""

    small = target // SMALL_FRACTION if small is None else small
    moves = moves or {}
    sizes = files.sizes(folder)
    schemas: dict[str, Any] = {}
    rows: dict[str, int] = {}
    for path in sorted(sizes):
        try:
            meta = _footer(path)
            schemas[path], rows[path] = meta.schema.to_arrow_schema(), meta.num_rows
        except Exception:  # a part that does not read is left as it is
            continue
    grouped: set[str] = set()
    after = len(sizes)
    distinct: list[Any] = []
    for schema in schemas.values():
        if not any(schema.equals(s, check_metadata=True) for s in distinct):
            distinct.append(schema)
    for schema in distinct:
        same = [(p, sizes[p], rows[p]) for p in sorted(schemas) if schemas[p].equals(schema, check_metadata=True)]
        for group in pack_groups(same, target, small, max_rows):
            tables, read = [], []
            for path in group:
                try:
                    tables.append(_reblobbed(_read_table(path), moves))
                    read.append(path)
                except Exception:  # left as it is
                    continue
            if len(read) < 2:
                continue
            _write(tables, schema, files.join(folder, part_name(".parquet")))
            crash_point("compact.merged")
            for path in read:
                files.remove(path)
            grouped.update(read)
            after -= len(read) - 1
    if moves:  # a part not merged still points at its pages' records
        for path in sorted(schemas):
            if path in grouped:
                continue
            try:
                table = _read_table(path)
            except Exception:
                continue
            moved = _reblobbed(table, moves)
            if moved is not table:
                _write([moved], schemas[path], files.join(folder, part_name(".parquet")))
                files.remove(path)
    return Compaction(len(sizes), after)


def compact_round(
    outputs: RoundOutputs,
    warc_target: int,
    parquet_target: int,
    max_index: int | None = None,
    max_rows: int | None = None,
) -> dict[str, Compaction]:
    """Compacts every kind of a round's staged files; returns each kind's files before and
    after. Called once, before the commit marker."""
    # A pages/ part that does not read could not follow its records into a merged file: the
    # WARC files are then left as they are, so that no page event points at a deleted one.
    small = None if _footers_read(outputs.staged("pages")) else 0
    warc, index, moves = compact_warc(outputs, warc_target, small=small, max_index=max_index)
    report = {"warc": warc, "cdxj": index}
    for kind in ("pages", "links", "errors"):
        report[kind] = compact_parquet(
            outputs.staged(kind), parquet_target, max_rows=max_rows, moves=moves if kind == "pages" else None
        )
    return report
