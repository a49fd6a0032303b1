"""Quarantine: an element that fails in two rounds is not tried again until released.

A round's dead letters (``errors/round=N/``, transforms/dead_letter.py) name the element
that failed: a URL, or else a host. At the round's commit each such element's failure is
booked in the store's ``meta`` table, one row per element (``quarantine/url/<URL>`` or
``quarantine/host/<host>``) holding the rounds it failed in and its last reason. When the
rounds reach :data:`ROUNDS_TO_QUARANTINE`, the element is quarantined:

- a URL's frontier rows stay where they are (nothing is lost), and select holds them: no
  round plans the URL (``select/quarantined_rows``);
- a host is held like a paused host (select gives it a pause with no end): its URLs stay
  queued and get no slots.

``beamcrawl hosts release HOST|URL`` ends a quarantine (and the failure count): the next
round plans the URL or host again, from the frontier rows it kept. ``beamcrawl hosts show``
lists a host's quarantined URLs and whether the host itself is, ``beamcrawl export quarantine`` all of them as Parquet.
Nothing here imports Beam.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any, Iterable, Iterator

from beamcrawl.schemas.records import HostPolicy
from beamcrawl.stores.base import Mutation, Store

__all__ = [
    "PREFIX",
    "ROUNDS_TO_QUARANTINE",
    "book_failures",
    "element_of",
    "kept_fp",
    "kept_fps",
    "list_quarantine",
    "load_state",
    "quarantine_policy",
    "quarantined_hosts",
    "quarantined_urls",
    "read_letters",
    "release",
    "settle_letters",
]

TABLE = "meta"
CELL = "m:quarantine"
PREFIX = b"quarantine/"
ROUNDS_TO_QUARANTINE = 2
FRONTIER_KEY_HEX = 32  # 8-byte due time + 8-byte fingerprint, as hex
MAX_ID_BYTES = 3000  # Bigtable row keys are at most 4 KiB
BOOK_ROWS = 10_000  # elements booked a store read and write at a time
READ_ROWS = 10_000  # dead letters read from a file at a time
# What a commit reads of a dead letter (transforms/dead_letter.py DeadLetter): not its traceback.
LETTER_COLUMNS = ("stage", "key", "url", "host", "exception", "message")


def row_key(kind: str, ident: str) -> bytes:
    return PREFIX + kind.encode() + b"/" + ident.encode("utf-8", "backslashreplace")[:MAX_ID_BYTES]


def element_of(letter: dict[str, Any]) -> tuple[str, str] | None:
    """``("url", URL)`` or ``("host", host)``: what a dead letter's element is; None when it
    names neither (a domain, a store row)."""
    if letter.get("url"):
        return "url", str(letter["url"])
    if letter.get("host"):
        return "host", str(letter["host"])
    return None


def _frontier_key(letter: dict[str, Any]) -> bytes | None:
    key = letter.get("key") or ""
    if len(key) == FRONTIER_KEY_HEX:
        try:
            return bytes.fromhex(key)
        except ValueError:
            return None
    return None


def load_state(cells: dict[str, bytes] | None) -> dict[str, Any] | None:
    """An element's failure record from its ``meta`` row's cells; None when absent or unreadable."""
    if not cells or CELL not in cells:
        return None
    try:
        state = json.loads(cells[CELL])
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def book_failures(
    store: Store, round_no: int, letters: Iterable[dict[str, Any]], chunk: int = BOOK_ROWS
) -> list[tuple[str, str]]:
    """Books a round's dead letters; quarantines the elements that failed in enough rounds.

    An element's first letter is booked (its stage, exception and message); ``letters`` is
    read once, as it comes, and booked ``chunk`` elements at a time (one key-set read and one
    write each), so a round whose every page failed is booked in bounded memory: what stays
    is the row key of each element booked. Idempotent per round (a resumed commit books the
    same round again): rounds are a set.

    Returns:
        The elements quarantined by this call, as ``(kind, id)``.
    """
    booked: set[bytes] = set()
    pending: dict[bytes, tuple[tuple[str, str], dict[str, Any]]] = {}
    newly: list[tuple[str, str]] = []
    for letter in letters:
        element = element_of(letter)
        if element is None:
            continue
        key = row_key(*element)
        if key in booked or key in pending:
            continue
        pending[key] = (element, letter)
        if len(pending) >= chunk:
            newly.extend(_book(store, round_no, pending))
            booked.update(pending)
            pending = {}
    if pending:
        newly.extend(_book(store, round_no, pending))
    return newly


def _book(
    store: Store, round_no: int, pending: dict[bytes, tuple[tuple[str, str], dict[str, Any]]]
) -> list[tuple[str, str]]:
    """Books one chunk of elements, each with its first letter; the ones quarantined now."""
    stored = store.read_keys(TABLE, sorted(pending))
    writes: list[Mutation] = []
    newly: list[tuple[str, str]] = []
    for key, (element, letter) in sorted(pending.items()):
        kind, ident = element
        state = load_state(stored.get(key)) or {"kind": kind, "id": ident, "rounds": [], "quarantined": False}
        state["rounds"] = sorted(set(state.get("rounds", [])) | {round_no})
        state.update(
            stage=letter.get("stage"),
            exception=letter.get("exception"),
            message=letter.get("message"),
            host=letter.get("host") or (ident if kind == "host" else ""),
        )
        if not state.get("quarantined") and len(state["rounds"]) >= ROUNDS_TO_QUARANTINE:
            state["quarantined"] = True
            state["since"] = round_no
            newly.append(element)
        writes.append(Mutation.set(key, {CELL: json.dumps(state, sort_keys=True).encode()}))
    store.mutate(TABLE, writes)
    return newly


def quarantined_urls(store: Store) -> set[int]:
    """Fingerprints of the quarantined URLs (one range scan of their rows: few, as they are
    failures). Select holds every frontier row of these URLs."""
    from beamcrawl.core.urls.urlnorm import fingerprint

    start = PREFIX + b"url/"
    out = set()
    for _key, cells in store.read_range(TABLE, start, start[:-1] + b"0"):
        state = load_state(cells)
        if state and state.get("quarantined") and isinstance(state.get("id"), str):
            out.add(fingerprint(state["id"]))
    return out


def quarantined_hosts(store: Store, hosts: Iterable[str]) -> set[str]:
    """Which of ``hosts`` are quarantined (one key-set read of their rows)."""
    keys = {row_key("host", h): h for h in hosts if h}
    if not keys:
        return set()
    rows = store.read_keys(TABLE, sorted(keys))
    return {keys[k] for k, cells in rows.items() if (state := load_state(cells)) and state.get("quarantined")}


def quarantine_policy(host: str, policy: HostPolicy | None) -> HostPolicy:
    """The policy a quarantined host is planned with: paused without end (its URLs stay queued)."""
    return replace(policy or HostPolicy(host=host), pause_until=math.inf)


def list_quarantine(store: Store, host: str | None = None, only_quarantined: bool = True) -> list[dict[str, Any]]:
    """The booked elements (one scan of the quarantine rows); with ``host``, the host itself
    and its URLs only."""
    out = []
    end = PREFIX[:-1] + bytes([PREFIX[-1] + 1])
    for _key, cells in store.read_range(TABLE, PREFIX, end):
        state = load_state(cells)
        if state is None or (only_quarantined and not state.get("quarantined")):
            continue
        if host is not None and state.get("host") != host and state.get("id") != host:
            continue
        out.append(state)
    return out


def release(store: Store, target: str) -> list[dict[str, Any]]:
    """Ends the quarantine (and the failure count) of a URL or host ``target``. Returns the
    released elements."""
    from beamcrawl.core.urls.urlnorm import InvalidURL, host_of, normalize

    candidates = [("url", target), ("host", target)]
    try:
        norm = normalize(target)
        candidates.append(("url", norm))
        if "://" not in target:
            candidates.append(("host", host_of(norm)))
    except (InvalidURL, ValueError):
        if "://" not in target:
            try:
                candidates.append(("host", host_of(normalize(f"http://{target}/"))))
            except (InvalidURL, ValueError):
                pass
    keys = sorted({row_key(*c) for c in candidates})
    rows = store.read_keys(TABLE, keys)
    released = [state for key in keys if (state := load_state(rows.get(key))) is not None]
    if released:
        store.mutate(TABLE, [Mutation.delete_row(k) for k in keys if k in rows])
    return released


def read_letters(paths: Iterable[str], batch_rows: int = READ_ROWS) -> Iterator[dict[str, Any]]:
    """A round's dead letters (``errors/round=N/*.parquet``) as row dicts, as they are read:
    ``batch_rows`` rows of a file at a time, and only the columns a commit uses
    (:data:`LETTER_COLUMNS`; not the tracebacks). A round whose every page failed has as
    many letters as pages: they are never all held at once."""
    import io

    import pyarrow.parquet as pq

    from beamcrawl.core.runtime import files

    for path in paths:
        with files.open_read(path) as fh:
            source = fh if fh.seekable() else io.BytesIO(fh.read())
            table = pq.ParquetFile(source)
            columns = [c for c in LETTER_COLUMNS if c in table.schema_arrow.names]
            for batch in table.iter_batches(batch_size=batch_rows, columns=columns):
                yield from batch.to_pylist()


def kept_fps(letters: Iterable[dict[str, Any]]) -> set[int]:
    """Fingerprints of the URLs whose frontier rows a round's commit must keep: every URL
    with a dead letter, though another branch of the round finished it."""
    return {fp for letter in letters if (fp := kept_fp(letter)) is not None}


def kept_fp(letter: dict[str, Any]) -> int | None:
    """The fingerprint of the URL whose frontier row a dead letter keeps; None if it names none."""
    from beamcrawl.core.urls.urlnorm import fingerprint

    frontier = _frontier_key(letter)
    if frontier is not None:
        return int.from_bytes(frontier[8:], "big")
    if letter.get("url"):
        try:
            return fingerprint(letter["url"])
        except (ValueError, TypeError):
            return None
    return None


def settle_letters(
    store: Store, round_no: int, letters: Iterable[dict[str, Any]]
) -> tuple[set[int], list[tuple[str, str]]]:
    """A round's commit's one pass over its dead letters: the fingerprints whose frontier rows
    it keeps (:func:`kept_fps`) and the elements its bookings quarantined (:func:`book_failures`)."""
    keep: set[int] = set()

    def noted(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for letter in rows:
            fp = kept_fp(letter)
            if fp is not None:
                keep.add(fp)
            yield letter

    newly = book_failures(store, round_no, noted(letters))
    return keep, newly
