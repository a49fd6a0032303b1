"""The content-seen set's rows: the ``content`` and ``simhash`` tables, how content seen
writes them and how it reads them back (docs/ARCHITECTURE.md §2).

=========  ========================================  ==========================================
table      key                                       cells
=========  ========================================  ==========================================
content    8-byte big-endian checksum                ``c:json`` (binary, ``schemas/cells.py``;
                                                     JSON in older rows): url, kind,
                                                     fetched_at, digest, distance, round
simhash    table byte + left-aligned prefix (4       ``s:<fp hex><url fp hex>``: url and round
           bytes of ten tables, 5 of twenty)         in the first table; one format byte in
                                                     the others (older rows: JSON, the
                                                     round alone, or url in all)
=========  ========================================  ==========================================

Rows carry the round that wrote them; rows of this round or a later one do not count
(:func:`counts_in_round`), so a rerun of a crashed round decides afresh rather than from its
own half-written decisions. A cell that does not decode (truncated, garbage) is read as
absent and counted (``content_seen/unreadable_cells``), never an error. How many tables a
store keeps, and so its simhash rows' keys, is the store's record
(:mod:`beamcrawl.state.simhash_layout`). The decisions themselves are content seen's
(:mod:`beamcrawl.transforms.content_seen`).
"""

from __future__ import annotations

import dataclasses
import json
import operator
import struct
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

from apache_beam.metrics import Metrics

from beamcrawl.core.content import textfp
from beamcrawl.schemas import cells as cellfmt
from beamcrawl.schemas.records import Probe, key_fp, shuffled
from beamcrawl.stores.base import Cell, Mutation

__all__ = [
    "CONTENT_CELL",
    "CONTENT_TABLE",
    "SIMHASH_FAMILY",
    "SIMHASH_TABLE",
    "ContentRecord",
    "counts_in_round",
    "name_key",
    "names_from_rows",
    "parse_simhash_cells",
    "read_content_rows",
    "simhash_cells",
    "simhash_row_cells",
    "simhash_value",
    "sorted_cells",
    "sorted_run",
]

CONTENT_TABLE = "content"
SIMHASH_TABLE = "simhash"
CONTENT_CELL = "c:json"
SIMHASH_FAMILY = "s"

# Stored content and simhash cells that did not decode (read as absent).
_UNREADABLE = Metrics.counter("content_seen", "unreadable_cells")


def counts_in_round(round_written: int | None, round_no: int | None) -> bool:
    """Rows this round (a crashed earlier attempt) or a later one wrote do not count."""
    return round_no is None or round_written is None or round_written < round_no


@shuffled
@dataclass(frozen=True)
class ContentRecord:
    """A row of the content-seen set: where the page with these bytes is kept.

    ``kind`` is ``exact`` when ``url`` holds these very bytes, ``near`` when the bytes were
    found to be a near copy of ``url`` (nothing with them is stored: a later copy of them is
    a near copy of ``url`` too).
    """

    url: str
    kind: str = "exact"
    fetched_at: float | None = None
    digest: str | None = None
    distance: int = 0
    round: int | None = None

    def to_cells(self) -> dict[str, bytes]:
        """The row's one cell (``c:json``, by its old name), binary (``schemas/cells.py``);
        JSON for a record whose values the binary layout cannot hold exactly."""
        raw = cellfmt.encode_content(self.url, self.kind, self.fetched_at, self.digest, self.distance, self.round)
        if raw is None:
            raw = json.dumps(dataclasses.asdict(self), separators=(",", ":")).encode()
        return {CONTENT_CELL: raw}

    @classmethod
    def from_cells(cls, row: Mapping[str, bytes]) -> "ContentRecord":
        """Reads a row written in either format.

        Raises:
            ValueError: No content cell, or one that does not decode.
        """
        raw = row.get(CONTENT_CELL)
        if raw is None:
            raise ValueError("row has no content cell")
        if cellfmt.is_binary(raw):
            return cls(*cellfmt.decode_content(raw))
        values = json.loads(raw)
        if type(values) is not dict or not isinstance(values.get("url"), str):
            raise ValueError("content cell is not a record")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


def read_content_rows(rows: Iterable[tuple[bytes, Mapping[str, bytes]]]) -> Iterator[tuple[int, ContentRecord]]:
    """``(checksum, record)`` of stored content rows, in their order; a row that does not
    decode (truncated, garbage) is left out as if absent, and counted
    (``content_seen/unreadable_cells``): its checksum is then new content, recorded again."""
    for key, row in rows:
        try:
            yield key_fp(key), ContentRecord.from_cells(row)
        except (ValueError, TypeError, KeyError, struct.error, RecursionError):
            _UNREADABLE.inc()


def parse_simhash_cells(row: Mapping[str, bytes], round_no: int | None) -> list[tuple[int, int, str | None]]:
    """``(fingerprint, url fingerprint, url)`` of the originals stored in one row that count
    this round (the qualifier holds both fingerprints). The URL is None in a compact cell
    (the round alone: see :func:`simhash_cells`). A cell that does not decode, or whose
    qualifier is not two fingerprints, is skipped and counted (``unreadable_cells``)."""
    out = []
    for column, raw in row.items():
        qualifier = column.partition(":")[2]
        try:
            url, written = simhash_value(raw)
            if len(qualifier) != 32:
                raise ValueError("not two fingerprints")
            fp, url_fp = int(qualifier[:16], 16), int(qualifier[16:], 16)
        except (ValueError, TypeError, RecursionError):
            _UNREADABLE.inc()
            continue
        if counts_in_round(written, round_no):
            out.append((fp, url_fp, url))
    return out


def simhash_value(raw: bytes) -> tuple[str | None, int | None]:
    """``(url, round)`` of a simhash cell in either format (binary, or JSON: an object with
    url and round, or the round alone).

    Raises:
        ValueError: It does not decode.
    """
    if cellfmt.is_binary(raw):
        return cellfmt.decode_simhash(raw)
    value = json.loads(raw)
    if isinstance(value, dict):
        url, written = value.get("url"), value.get("round")
    else:
        url, written = None, value
    if not (url is None or isinstance(url, str)) or not (written is None or type(written) is int):
        raise ValueError("simhash cell holds neither a name nor a round")
    return url, written


def simhash_row_cells(probe: Probe, round_no: int | None, layout: textfp.TableLayout = textfp.LAYOUT) -> list[Cell]:
    """The cells that record an original's simhash in every permuted table, one a row:
    ``(row key, column, value)`` for ``Store.write_cells``.

    The first table's cell names the original and the round that wrote it (binary,
    ``schemas/cells.py``: 12 bytes and the URL); the other tables' cells hold nothing but
    their format byte (the fingerprints are in the qualifier). A match found there is named
    from the first table's cell (:func:`names_from_rows`), and counts only if that cell's
    round does: the same originals are found as when each cell carried its round. Rows
    written as JSON (``{"url", "round"}`` in the first table, the round alone or the URL in
    the others) read as they did.
    """
    assert probe.simhash is not None
    column = f"{SIMHASH_FAMILY}:{probe.simhash:016x}{probe.url_fp:016x}"
    name = cellfmt.encode_simhash_named(probe.url, round_no)
    if name is None:
        name = json.dumps({"url": probe.url, "round": round_no}, separators=(",", ":")).encode()
    keys = layout.keys_of(probe.simhash)
    seen = cellfmt.SIMHASH_SEEN_CELL
    return [(keys[0], column, name), *[(key, column, seen) for key in keys[1:]]]


def simhash_cells(probe: Probe, round_no: int | None, layout: textfp.TableLayout = textfp.LAYOUT) -> list[Mutation]:
    """:func:`simhash_row_cells` as a mutation a row, for ``Store.mutate``."""
    return [Mutation(key, {column: value}) for key, column, value in simhash_row_cells(probe, round_no, layout)]


def sorted_run(mutations: list[Mutation]) -> list[Mutation]:
    """The mutations in key order (stable: one key's keep theirs), as one run to write."""
    mutations.sort(key=_mutation_key)
    return mutations


def sorted_cells(cells: list[Cell]) -> list[Cell]:
    """The cells in key order (stable), as one run to write."""
    cells.sort(key=_cell_key)
    return cells


_mutation_key = operator.attrgetter("key")
_cell_key = operator.itemgetter(0)


def name_key(fp: int, layout: textfp.TableLayout = textfp.LAYOUT) -> bytes:
    """The row whose cell names the original with simhash ``fp`` (its first table's)."""
    return layout.table_key(0, layout.permute(fp, 0))


def names_from_rows(
    wanted: Iterable[tuple[int, int]],
    rows: Mapping[bytes, Mapping[str, bytes]],
    layout: textfp.TableLayout = textfp.LAYOUT,
    round_no: int | None = None,
) -> dict[tuple[int, int], str]:
    """The URLs of stored originals ``(fingerprint, url fingerprint)``, from their first
    tables' rows (read by key set: ``rows`` maps each :func:`name_key` to its cells). An
    original whose naming row is missing (a crash cut its writes short), or was written by
    round ``round_no`` or a later one, has no name."""
    out = {}
    for fp, url_fp in wanted:
        raw = rows.get(name_key(fp, layout), {}).get(f"{SIMHASH_FAMILY}:{fp:016x}{url_fp:016x}")
        if raw is None:
            continue
        try:
            url, written = simhash_value(raw)
        except (ValueError, TypeError, RecursionError):
            _UNREADABLE.inc()
            continue
        if url is not None and counts_in_round(written, round_no):
            out[(fp, url_fp)] = url
    return out
