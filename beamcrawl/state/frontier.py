"""The frontier's and the seen set's row formats, as both the round's stages and the crawl loop
write and read them: new URLs queued then marked seen, the key of a URL's scheduled visit, the
staged requeue lines a round's commit turns into frontier rows, and the holds it moves known
URLs' pending visits to."""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass, replace
from itertools import repeat
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from beamcrawl.core.policy.change_rate import importance
from beamcrawl.core.runtime.faults import crash_point
from beamcrawl.schemas import cell_columns
from beamcrawl.schemas import cells as binary
from beamcrawl.schemas.candidate_block import CandidateBlock
from beamcrawl.schemas.records import (
    JSON_CELL,
    QUEUED_CELL,
    Candidate,
    FrontierEntry,
    UrlState,
    fp_key,
    frontier_key,
    key_fp,
)
from beamcrawl.stores.base import Cell, Mutation, Store

WRITE_BATCH = 2000

REASON_CELL = "u:reason"
# The due time (epoch ms, ASCII digits) a redirect's Retry-After holds the URL's visit to, the
# latest of those in force when it was written: where that visit's frontier row is, for the
# next hold and a sitemap's hint to find it.
HOLD_CELL = "u:hold"


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


def _by_fp(entry: FrontierEntry) -> int:
    return entry.fp


def queue_new_urls(store: Store, new: Sequence[Candidate], now_ms: int, reason: str = "") -> list[FrontierEntry]:
    """Queues never-seen URLs, then marks them seen (in that order: crash-safe).

    A crash between the two writes leaves URLs queued but not seen: a rerun finds them
    unseen and queues them again (a duplicate frontier row, fetched once: assign_slots
    folds rows of one fingerprint). The other order could leave a URL seen but never
    queued, lost for good.
    """
    entries = [new_entry(c, now_ms, reason) for c in new]
    discovered = UrlState.discovered_cells
    # Written in key order (DRUM's sorted run): the frontier keys of one call share their
    # due time, so both tables' keys follow the fingerprint. Each batch is one store call
    # per table (one transaction on the embedded store, one MutateRows on Bigtable), as
    # cells (Store.write_cells): no Mutation made for each of a round's many new URLs.
    ordered = sorted(entries, key=_by_fp)
    for i in range(0, len(ordered), WRITE_BATCH):
        batch = ordered[i : i + WRITE_BATCH]
        store.write_cells("frontier", [(e.key, c, v) for e in batch for c, v in e.to_cells().items()])
        crash_point("url_seen.after_frontier_write")
        # One small cell per URL (UrlState.discovered_cells), not one per UrlState field.
        seen: list[Cell] = []
        for e in batch:
            key = fp_key(e.fp)
            seen.extend((key, c, v) for c, v in discovered(e.url, now_ms, e.source, e.depth).items())
            if e.reason:  # the operator's reason for submitted work, in its own cell
                seen.append((key, REASON_CELL, _json(e.reason)))
            if e.due_ms > now_ms:  # held by its redirect's Retry-After: the row is not at now_ms
                seen.append((key, HOLD_CELL, str(e.due_ms).encode()))
        store.write_cells("urls", seen)
    return entries


def new_entry(c: Candidate, now_ms: int, reason: str = "") -> FrontierEntry:
    """The frontier entry of a never-seen candidate, due at ``now_ms``, or when its hold
    ends if later (a redirect's Retry-After: no request for it before then)."""
    due_ms = now_ms
    if c.not_before is not None:
        due_ms = max(now_ms, math.ceil(c.not_before * 1000))
    return FrontierEntry(
        url=c.url,
        fp=c.fp,
        host=c.host,
        due_ms=due_ms,
        # On the one scale of slot assignment: a URL's importance (its way in, depth and the
        # other hosts linking to it), or the level it was submitted at.
        priority=max(c.priority, importance(len(c.inlink_hosts), c.source, c.depth)),
        depth=c.depth,
        source=c.source,
        inlinks=c.inlinks,
        kind=c.kind,
        hops=c.hops,
        lastmod=c.lastmod,
        robots_origin=c.robots_origin,
        reason=reason,
    )


@dataclass
class QueuedUrls:
    """The URLs :func:`queue_new_block` queued: a block of their candidates in key order, and
    their frontier entries made only when iterated (a round does not read them)."""

    block: CandidateBlock
    now_ms: int
    reason: str = ""

    def __len__(self) -> int:
        return len(self.block)

    def __iter__(self) -> Iterator[FrontierEntry]:
        return (new_entry(c, self.now_ms, self.reason) for c in self.block.to_candidates())


def block_priorities(block: CandidateBlock) -> np.ndarray:
    """Each row's frontier priority, as :func:`new_entry` gives it: the greater of its
    offered priority and its importance. ``importance`` is called once per distinct
    (linking hosts, source, depth), a bucket having few, so every value is the function's own."""
    linking = block.link_end - block.link_start
    sources = block.sources
    if (
        len(block)
        and 0 <= int(block.depth.min())
        and int(block.depth.max()) < 1 << 40
        and int(linking.max()) < 1 << 15
        and len(sources) <= 1 << 8
    ):
        # One int a row (depth, linking hosts, source, each in bits of its own): far cheaper
        # to make distinct than rows of three.
        packed = (block.depth << 23) | (linking << 8) | block.source
        distinct, inverse = np.unique(packed, return_inverse=True)
        signals = [(p >> 8 & 0x7FFF, p & 0xFF, p >> 23) for p in distinct.tolist()]
    else:
        rows, inverse = np.unique(np.stack([linking, block.source, block.depth], axis=1), axis=0, return_inverse=True)
        signals = rows.tolist()
    values = np.array([importance(n, sources[s], d) for n, s, d in signals], dtype=np.float64)
    worth = values[inverse.reshape(-1)]
    return np.where(worth > block.priority, worth, block.priority)  # max(offered, worth), as max() picks


def queue_new_block(
    store: Store, block: CandidateBlock, rows: np.ndarray, now_ms: int, reason: str = ""
) -> QueuedUrls | list[FrontierEntry]:
    """:func:`queue_new_urls` for ``rows`` of a block (a bucket's new URLs), the cells made
    from the columns (schemas/cell_columns.py): the same rows, byte for byte, written in the
    same order, with no object a URL. A block whose values the columns cannot encode (held as
    objects, text that is not ASCII, a value past its field) is queued as candidates."""
    rows = np.asarray(rows, dtype=np.int64)
    if not block.columnar or not 0 <= now_ms < 1 << 63:
        return queue_new_urls(store, block.to_candidates(rows), now_ms, reason)
    picked = block.take(rows[np.argsort(block.fp[rows], kind="stable")])
    if not len(picked):
        return QueuedUrls(picked, now_ms, reason)
    queued = cell_columns.frontier_cells(picked, now_ms, block_priorities(picked), reason)
    seen = cell_columns.queued_cells(picked, now_ms) if queued is not None else None
    if queued is None or seen is None:
        return queue_new_urls(store, picked.to_candidates(), now_ms, reason)
    frontier_keys = cell_columns.frontier_keys(now_ms, picked.fp)
    seen_keys = cell_columns.seen_keys(picked.fp)
    why = _json(reason)
    for i in range(0, len(picked), WRITE_BATCH):
        end = i + WRITE_BATCH
        store.write_cells("frontier", list(zip(frontier_keys[i:end], repeat(JSON_CELL), queued[i:end])))
        crash_point("url_seen.after_frontier_write")
        cells: list[Cell] = list(zip(seen_keys[i:end], repeat(QUEUED_CELL), seen[i:end]))
        if reason:  # after its key's other cell, as the object path writes it (the sort is stable)
            cells += zip(seen_keys[i:end], repeat(REASON_CELL), repeat(why))
        store.write_cells("urls", cells)
    return QueuedUrls(picked, now_ms, reason)


def scheduled_key(fp: int, revisit: dict | None, after_ms: int) -> bytes | None:
    """The frontier key of a URL's scheduled visit, from its revisit state: the row
    :func:`next_entry` wrote, if it is due after ``after_ms`` (None: none pending). Work that
    moves the visit forward names it in ``also_keys``, so the visit is moved, not doubled."""
    due = (revisit or {}).get("next_due")
    if not isinstance(due, (int, float)) or not math.isfinite(due) or int(due * 1000) <= after_ms:
        return None
    return frontier_key(int(due * 1000), fp)


def requeue_text(entry: FrontierEntry, revisit_cell: bytes | None = None) -> str:
    """A next visit's frontier row as one staged line: ``<key hex> <cell, base64>``, the cell
    encoded here once, as the commit writes it (``FrontierEntry.to_cells``, given the
    entry's revisit state already encoded as ``revisit_cell`` where the caller has it)."""
    return entry.key.hex() + " " + base64.b64encode(entry.to_cells(revisit_cell)[JSON_CELL]).decode("ascii")


def read_requeue_line(line: str) -> tuple[bytes, dict[str, bytes]]:
    """Inverse of :func:`requeue_text`: the row's key and cells. A binary cell is written as
    staged once its layout is checked (``cells.peek_frontier``); a JSON one, and a line of
    the versions that staged the row's JSON itself (``<key hex> {...}``), is read and
    written as every frontier row is.

    Raises:
        ValueError: Not a staged line.
    """
    key_hex, _, row = line.partition(" ")
    key = bytes.fromhex(key_hex)
    if row.startswith("{"):  # staged as JSON, before the cells were
        return key, FrontierEntry.from_cells({JSON_CELL: row.encode()}).to_cells()
    try:
        cell = base64.b64decode(row, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"not a staged frontier row: {exc}") from None
    if binary.is_binary(cell):
        binary.peek_frontier(cell)
        return key, {JSON_CELL: cell}
    return key, FrontierEntry.from_cells({JSON_CELL: cell}).to_cells()


@dataclass(frozen=True)
class Hold:
    """A known URL's hold, as a round stages it for its commit: no visit before ``due_ms``
    (a redirect's Retry-After), and the frontier keys where its pending visit may be."""

    due_ms: int
    keys: frozenset[bytes]

    def join(self, other: "Hold") -> "Hold":
        """Two holds of one URL: the later due time stands, every key named is looked at."""
        return Hold(max(self.due_ms, other.due_ms), self.keys | other.keys)


def pending_keys(fp: int, cells: Mapping[str, bytes] | None) -> list[bytes]:
    """The frontier keys at which a known URL's pending visit may be, read off its seen-set
    row: its scheduled revisit (``u:revisit``'s next due, :func:`scheduled_key`), its row as
    first queued (a new URL is due when found, ``u:q``'s first-seen time) and the visit a hold
    last moved (``u:hold``). A key named may hold no row (fetched since, or moved): the commit
    reads them. A cell that does not decode names nothing."""
    cells = cells or {}
    keys: set[bytes] = set()
    try:
        state = UrlState.from_cells(dict(cells))
    except (ValueError, TypeError, RecursionError):  # a cell of another shape
        state = None
    if state is not None:
        if isinstance(state.first_seen_ms, int) and 0 <= state.first_seen_ms < 1 << 63:
            keys.add(frontier_key(state.first_seen_ms, fp))
        revisit = state.revisit if isinstance(state.revisit, dict) else None
        scheduled = scheduled_key(fp, revisit, -1)
        if scheduled is not None:
            keys.add(scheduled)
    held = held_until(cells)
    if held is not None:
        keys.add(frontier_key(held, fp))
    return sorted(keys)


def held_until(cells: Mapping[str, bytes] | None) -> int | None:
    """The hold a seen-set row notes (``u:hold``, epoch ms), or None (none, or a cell that
    does not read as one)."""
    raw = (cells or {}).get(HOLD_CELL, b"")
    return int(raw) if raw.isdigit() and int(raw) < 1 << 63 else None


def hold_text(fp: int, hold: Hold) -> str:
    """A hold as one staged line: ``<fp hex> <due ms> <key hex>...``."""
    return " ".join([f"{fp:016x}", str(hold.due_ms), *sorted(k.hex() for k in hold.keys)])


def read_hold_lines(lines: Iterable[str], into: dict[int, Hold] | None = None) -> dict[int, Hold]:
    """Staged hold lines (:func:`hold_text`) as fingerprint → hold, holds of one URL joined
    (``Hold.join``), added to ``into`` if given.

    Raises:
        ValueError: Not a staged hold line.
    """
    holds: dict[int, Hold] = {} if into is None else into
    for line in lines:
        fp_hex, due, *keys = line.split(" ")
        if len(fp_hex) != 16 or not due.isdigit() or int(due) >= 1 << 63:
            raise ValueError(f"not a staged hold line: {line[:80]!r}")
        hold = Hold(int(due), frozenset(bytes.fromhex(k) for k in keys))
        if any(len(k) != 16 for k in hold.keys):
            raise ValueError(f"not a staged hold line: {line[:80]!r}")
        fp = int(fp_hex, 16)
        kept = holds.get(fp)
        holds[fp] = hold if kept is None else kept.join(hold)
    return holds


def due_of(key: bytes) -> int:
    """A frontier key's due time (epoch ms)."""
    return key_fp(key[:8])


def held_row(key: bytes, cells: dict[str, bytes], holds: Mapping[int, Hold]) -> tuple[bytes, dict[str, bytes]]:
    """A next visit's row as the commit writes it: due at its URL's hold where it was due
    before (a URL fetched this round whose redirect asked to wait), else as it came."""
    if not holds or len(key) != 16:
        return key, cells
    hold = holds.get(key_fp(key[8:]))
    if hold is None or due_of(key) >= hold.due_ms:
        return key, cells
    moved = replace(FrontierEntry.from_cells(cells), due_ms=hold.due_ms)
    return moved.key, moved.to_cells()


def hold_visits(store: Store, holds: Mapping[int, Hold], batch: int = WRITE_BATCH) -> int:
    """Moves known URLs' pending visits due before their holds to the holds; returns how many
    rows were moved.

    Per batch of URLs: one key-set read of the frontier keys their holds name, then, for each
    URL with rows there due before its hold, one row due at the hold in their place (the
    first row's entry, the highest priority of them, the keys they would delete when done).
    A row due at or after the hold stays: no visit is moved earlier. The new rows are written
    first, the old ones deleted next, then the hold noted in the seen set (``u:hold``, where
    the next hold and a sitemap's hint find the visit): a crash between leaves a visit twice,
    never none, and the resumed commit moves it again. A row that does not decode stays
    where it is.
    """
    moved = 0
    items = sorted(holds.items())
    for i in range(0, len(items), batch):
        chunk = items[i : i + batch]
        rows = store.read_keys("frontier", sorted({k for _, hold in chunk for k in hold.keys}))
        writes: list[Mutation] = []
        old: list[bytes] = []
        noted: list[Mutation] = []
        for fp, hold in chunk:
            early: list[tuple[bytes, FrontierEntry]] = []
            for key in sorted(hold.keys):
                cells = rows.get(key)
                if cells is None or due_of(key) >= hold.due_ms or key_fp(key[8:]) != fp:
                    continue
                try:
                    early.append((key, FrontierEntry.from_cells(cells)))
                except ValueError:
                    continue
            noted.append(Mutation.set(fp_key(fp), {HOLD_CELL: str(hold.due_ms).encode()}))
            if not early:
                continue
            gone = {key.hex() for key, _ in early}
            first = early[0][1]
            row = replace(
                first,
                due_ms=hold.due_ms,
                priority=max(e.priority for _, e in early),
                revisit=first.revisit or next((e.revisit for _, e in early if e.revisit), None),
                also_keys=sorted({k for _, e in early for k in e.also_keys} - gone),
            )
            writes.append(Mutation.set(row.key, row.to_cells()))
            old.extend(key for key, _ in early)
        if writes:
            store.mutate("frontier", writes)
            store.mutate("frontier", [Mutation.delete_row(k) for k in old])
            moved += len(old)
        if noted:
            store.mutate("urls", noted)
    return moved
