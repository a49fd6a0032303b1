"""A round's commit: staged files moved into place, finished frontier rows deleted, known URLs'
visits moved to their redirects' holds, dead letters booked, the round counter advanced;
resumable from a marker written first."""

from __future__ import annotations

import logging
from typing import Any, Iterator

from beamcrawl.core.runtime import files
from beamcrawl.core.runtime.faults import crash_point
from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.schemas.records import key_fp
from beamcrawl.state import quarantine
from beamcrawl.state.frontier import Hold, held_row, hold_visits, read_hold_lines, read_requeue_line
from beamcrawl.stores.base import Mutation, Store

log = logging.getLogger(__name__)


ROUND_KEY = b"round"
# Rows of a staged requeue or done file a commit writes to the store at once, and the bytes it
# reads of the file at once: what the commit holds, whatever the round's size.
COMMIT_ROWS = 10_000
READ_BLOCK = 1 << 20


def next_round(store: Store) -> int:
    raw = store.read_keys("meta", [ROUND_KEY]).get(ROUND_KEY, {}).get("m:next")
    return int(raw) if raw else 1


def staged_lines(path: str, rows: int = COMMIT_ROWS, block: int = READ_BLOCK) -> Iterator[list[bytes]]:
    """A staged file's non-empty lines (without their ends), at most ``rows`` at a time, the
    file read ``block`` bytes at a time: the commit holds a chunk of a file, not the file and
    a row object for each of its lines (an in-process round stages each kind in one file, its
    size growing with the round)."""
    chunk: list[bytes] = []
    rest = b""
    with files.open_read(path) as fh:
        while True:
            data = fh.read(block)
            if not data:
                break
            data = rest + data
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            for line in data[:cut].split(b"\n"):
                line = line.rstrip(b"\r")
                if line:
                    chunk.append(line)
                    if len(chunk) >= rows:
                        yield chunk
                        chunk = []
    rest = rest.rstrip(b"\r")
    if rest:  # a last line without its end
        chunk.append(rest)
    if chunk:
        yield chunk


def commit_round(store: Store, outputs: RoundOutputs, notes: dict[str, Any] | None = None) -> dict[str, list[str]]:
    """Moves the round's files into place, then deletes the frontier rows it finished.

    A marker written first makes the commit resumable: a crash before it, and the rerun
    redoes the round (its frontier rows are still there); a crash after it, and the rerun
    finishes this commit instead (moving what is left, deleting the finished rows) rather
    than fetching and storing the same pages again. The round counter advances last.

    Known URLs whose redirect asked to wait (staged holds) have no visit due before the wait
    ends: a next visit staged by this round is written due at the hold, and a visit pending
    from before is moved there once the finished rows are deleted (``frontier.hold_visits``).

    The round's dead letters are read back first: the frontier rows of the URLs they name
    are kept (not deleted with the finished ones), their failures are booked, and an
    element failing for the second round is quarantined (state/quarantine.py). ``notes``,
    if given, gets the newly quarantined elements.
    """
    crash_point("commit.before")
    outputs.mark_committing()
    moved = outputs.commit_files()
    crash_point("commit.after_files")
    letters = quarantine.read_letters(files.list_files(outputs.final("errors")))
    keep, newly = quarantine.settle_letters(store, outputs.round_no, letters)
    if notes is not None:
        notes["quarantined"] = [f"{kind} {ident}" for kind, ident in newly]
    # Known URLs a redirect's Retry-After holds (few: held redirect targets found known).
    holds: dict[int, Hold] = {}
    for path in outputs.holds_files():
        for lines in staged_lines(path, COMMIT_ROWS):
            read_hold_lines((line.decode("ascii") for line in lines), holds)
    # The next visits first: a crash between the two leaves a URL queued twice (folded at
    # slot assignment), never not at all. A held URL's next visit is due at its hold at the
    # earliest.
    requeued = 0
    for path in outputs.requeue_files():
        for lines in staged_lines(path, COMMIT_ROWS):
            rows = [held_row(*read_requeue_line(line.decode("utf-8")), holds) for line in lines]
            store.mutate("frontier", [Mutation.set(k, cells) for k, cells in rows])
            requeued += len(rows)
    crash_point("commit.after_requeue")
    finished = 0
    for path in outputs.done_files():
        for lines in staged_lines(path, COMMIT_ROWS):
            keys = [bytes.fromhex(word) for line in lines for word in line.decode("ascii").split()]
            if keep:  # a URL with a dead letter keeps its row, though another branch finished it
                keys = [k for k in keys if len(k) != 16 or key_fp(k[8:]) not in keep]
            store.mutate("frontier", [Mutation.delete_row(k) for k in keys])
            finished += len(keys)
    # Once the round's finished rows are gone, what a held URL still has queued is a visit
    # pending from before (a row this round deferred, a scheduled revisit): moved to the hold.
    held = hold_visits(store, holds)
    crash_point("commit.after_frontier_deletes")
    store.mutate("meta", [Mutation.set(ROUND_KEY, {"m:next": str(outputs.round_no + 1).encode()})])
    outputs.discard_staging()
    log.info(
        "round %d committed: %d frontier rows finished, %d revisits queued, %d visits held",
        outputs.round_no,
        finished,
        requeued,
        held,
    )
    return moved
