"""Compact binary cells for the rows a round writes most (docs/ARCHITECTURE.md §2).

A new URL costs a frontier row and a seen-set row, a fetch its outcome and revisit state in
the seen set and its next visit's frontier row (and, before its request, the host's clock),
a new original a content row and a simhash-table row a table (ten or twenty). Their cells
were JSON objects (field names and all, ~200-500 bytes, and ``json.loads`` to read); here
each is a struct of its fixed fields and length-prefixed UTF-8 strings. The first byte
names the format and its version: a byte below 0x20 that is not JSON whitespace, which
JSON text can never start with, so every decoder tells a binary cell from a JSON one by
that byte and reads both: a store written before keeps reading, with no migration.

=====  ============================  ====================================================
byte   cell                          layout after the byte (little-endian)
=====  ============================  ====================================================
0x01   frontier ``r:json``           flags B, fp Q, due_ms q, priority d, depth i,
                                     inlinks q, deferrals i, hops i, lastmod d, lengths
                                     6×H (url, host, source, kind, reason, robots_origin)
                                     and 2×I (also_keys: compact JSON; revisit: 0x07's
                                     layout, or compact JSON), the bytes
0x02   seen set ``u:q``              flags B, first_seen_ms q, depth q, lengths 2×H, url,
                                     source
0x03   content ``c:json``            flags B, fetched_at d, distance q, round q, lengths
                                     3×H, url, kind, digest
0x04   simhash, first table          flags B, round q, url length H, url
0x05   simhash, the other tables     nothing: the first table's cell names the original
                                     and its round (transforms/content_seen.py)
0x06   seen set ``u:o``              flags B, status q, fetched_at_ms q, lengths 4×H (url,
                                     state, checksum, error), the bytes
0x07   revisit state (``u:revisit``  flags H, 9×d (importance, lam, prior_rate, checked_at,
       and a frontier row's)         changed_at, stored_at, next_due, lastmod_agree,
                                     lastmod_disagree), 5×q (status, visits, changes,
                                     misses, errors), lengths 7×H (etag, last_modified,
                                     checksum, simhash, digest, moved_to, outcomes),
                                     history length H; the bytes, then the history's
                                     intervals n×d and kinds n×B
0x08   host clock ``r:clock``        4×d: at, end, delay, not_before (state/host_clock.py)
0x0B   host clock ``r:clock`` of a   4×d as 0x08, then errors in a row q (0x09, 0x0A are
       host with errors in a row     whitespace that may begin JSON)
=====  ============================  ====================================================

Flags say which optional fields are present (an absent one reads as None). A value that the
struct cannot hold exactly (an int past its width, a float where an int was, a string
longer than 65,535 bytes) makes the encoder write the JSON cell instead, so every value
round-trips as it did. Strings are UTF-8 with lone surrogates passed through, as JSON's
``\\ud800`` escapes kept them.

Decoders are total over bytes: a truncated or garbage cell raises :class:`CellError` (a
``ValueError``), which each caller counts and treats as no cell; nothing else escapes.
"""

from __future__ import annotations

import json
import struct
from sys import intern
from typing import Any

__all__ = [
    "CLOCK",
    "CLOCK_ERRORS",
    "CONTENT",
    "FRONTIER",
    "FRONTIER_HEAD",
    "FRONTIER_LASTMOD",
    "FRONTIER_ORIGIN",
    "OUTCOME",
    "QUEUED",
    "QUEUED_DEPTH",
    "QUEUED_HEAD",
    "QUEUED_SOURCE",
    "REVISIT",
    "SIMHASH_NAMED",
    "SIMHASH_SEEN",
    "SIMHASH_SEEN_CELL",
    "CellError",
    "decode_clock",
    "decode_clock_errors",
    "decode_content",
    "decode_frontier",
    "decode_outcome",
    "decode_queued",
    "decode_revisit",
    "decode_simhash",
    "encode_clock",
    "encode_content",
    "encode_frontier",
    "encode_outcome",
    "encode_queued",
    "encode_revisit",
    "encode_simhash_named",
    "is_binary",
    "peek_frontier",
]

FRONTIER = 0x01
QUEUED = 0x02
CONTENT = 0x03
SIMHASH_NAMED = 0x04
SIMHASH_SEEN = 0x05
OUTCOME = 0x06
REVISIT = 0x07
CLOCK = 0x08
CLOCK_ERRORS = 0x0B
# The cell of the other simhash tables: the fingerprint is in its qualifier, the original's
# name and round in the first table's cell, so it holds nothing else.
SIMHASH_SEEN_CELL = bytes((SIMHASH_SEEN,))
_REVISIT_BYTE = bytes((REVISIT,))

_ENC = "surrogatepass"
_COMPACT = json.JSONEncoder(separators=(",", ":"))

_FRONTIER = struct.Struct("<BBQqdiqiidHHHHHHII")
_QUEUED = struct.Struct("<BBqqHH")
_CONTENT = struct.Struct("<BBdqqHHH")
_SIMHASH = struct.Struct("<BBqH")
_OUTCOME = struct.Struct("<BBqqHHHH")
_REVISIT_HEAD = struct.Struct("<BH9d5q7HH")  # the 7 lengths: etag .. moved_to, then outcomes
_CLOCK = struct.Struct("<B4d")
_CLOCK_ERRORS = struct.Struct("<B4dq")  # a host's errors in a row too, when it has any (0x0B)

# Frontier flags.
_LASTMOD, _ORIGIN, _REVISIT, _ALSO = 1, 2, 4, 8
# Seen-set and content flags.
_SOURCE, _DEPTH = 1, 2
_FETCHED, _DIGEST, _ROUND = 1, 2, 4
# Fetch-outcome flags.
_STATUS, _AT, _CHECKSUM, _ERROR = 1, 2, 4, 8

#: The fixed heads and flags of the two cells a new URL costs, for the encoder that makes a
#: batch's at once from columns (schemas/cell_columns.py): the same layouts, named once here.
FRONTIER_HEAD, QUEUED_HEAD = _FRONTIER, _QUEUED
FRONTIER_LASTMOD, FRONTIER_ORIGIN = _LASTMOD, _ORIGIN
QUEUED_SOURCE, QUEUED_DEPTH = _SOURCE, _DEPTH


class CellError(ValueError):
    """A cell that does not decode: truncated, garbage, or of another format."""


def is_binary(raw: bytes) -> bool:
    """Whether ``raw`` is a binary cell of this module (else it is JSON, or garbage)."""
    return bool(raw) and raw[0] < 0x20 and raw[0] not in (0x09, 0x0A, 0x0D)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", _ENC)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", _ENC)


# --- frontier entries ----------------------------------------------------------------------


def encode_frontier(v: Any, revisit_cell: bytes | None = None) -> bytes | None:
    """A frontier entry's fields (a ``FrontierEntry``, read by attribute) as a binary cell,
    or None when a value does not fit the layout exactly (the caller writes JSON).
    ``revisit_cell`` is ``encode_revisit(v.revisit)`` where the caller encoded it already."""
    try:
        lastmod, origin, revisit, also = v.lastmod, v.robots_origin, v.revisit, v.also_keys
        if (
            type(v.priority) is not float
            or type(v.fp) is not int
            or type(v.due_ms) is not int
            or type(v.depth) is not int
            or type(v.inlinks) is not int
            or type(v.deferrals) is not int
            or type(v.hops) is not int
            or not (lastmod is None or type(lastmod) is float)
            or not (origin is None or isinstance(origin, str))
            or not (revisit is None or type(revisit) is dict)
            or type(also) is not list
        ):
            return None
        url, host, source, kind, reason = (
            _utf8(v.url),
            _utf8(v.host),
            _utf8(v.source),
            _utf8(v.kind),
            _utf8(v.reason),
        )
        origin_b = b"" if origin is None else _utf8(origin)
        also_b = _COMPACT.encode(also).encode() if also else b""
        if revisit is None:
            revisit_b = b""
        else:
            revisit_b = revisit_cell or encode_revisit(revisit) or _COMPACT.encode(revisit).encode()
        flags = (
            (_LASTMOD if lastmod is not None else 0)
            | (_ORIGIN if origin is not None else 0)
            | (_REVISIT if revisit is not None else 0)
            | (_ALSO if also else 0)
        )
        head = _FRONTIER.pack(
            FRONTIER,
            flags,
            v.fp,
            v.due_ms,
            v.priority,
            v.depth,
            v.inlinks,
            v.deferrals,
            v.hops,
            0.0 if lastmod is None else lastmod,
            len(url),
            len(host),
            len(source),
            len(kind),
            len(reason),
            len(origin_b),
            len(also_b),
            len(revisit_b),
        )
    except (struct.error, TypeError, ValueError, AttributeError, UnicodeError, KeyError, OverflowError):
        return None
    return b"".join((head, url, host, source, kind, reason, origin_b, also_b, revisit_b))


def decode_frontier(raw: bytes) -> tuple[Any, ...]:
    """A binary frontier cell's values in ``FrontierEntry.__init__`` order.

    Raises:
        CellError: Not a whole frontier cell of this format.
    """
    try:
        (
            version,
            flags,
            fp,
            due_ms,
            priority,
            depth,
            inlinks,
            deferrals,
            hops,
            lastmod,
            *lengths,
        ) = _FRONTIER.unpack_from(raw)
        if version != FRONTIER or _FRONTIER.size + sum(lengths) != len(raw):
            raise CellError("not a frontier cell")
        parts = []
        at = _FRONTIER.size
        for n in lengths:
            parts.append(raw[at : at + n])
            at += n
        url, host, source, kind, reason, origin, also, revisit = parts
        also_keys = json.loads(also) if flags & _ALSO else []
        revisit_v = None
        if flags & _REVISIT:
            revisit_v = decode_revisit(revisit) if revisit[:1] == _REVISIT_BYTE else json.loads(revisit)
        if type(also_keys) is not list or not (revisit_v is None or type(revisit_v) is dict):
            raise CellError("frontier cell with a malformed list or revisit state")
        # The texts a host's entries share (its name, the source and kind, a reason, the
        # robots.txt origin) are one string each, not one per entry: a round's due rows are
        # held by the hundred thousand, and pickle then writes a shared string once a batch.
        return (
            _text(url),
            fp,
            intern(_text(host)),
            due_ms,
            priority,
            depth,
            intern(_text(source)),
            inlinks,
            also_keys,
            deferrals,
            intern(_text(kind)),
            hops,
            intern(_text(reason)),
            lastmod if flags & _LASTMOD else None,
            intern(_text(origin)) if flags & _ORIGIN else None,
            revisit_v,
        )
    except CellError:
        raise
    except (struct.error, ValueError, TypeError, RecursionError) as exc:  # UnicodeError, JSONDecodeError too
        raise CellError(f"frontier cell does not decode: {exc}") from None


def peek_frontier(raw: bytes) -> tuple[str, int, int]:
    """The host, due time (ms) and fingerprint of a binary frontier cell, the rest unread:
    what the select needs to group a due row by host and name it. The cell's layout is
    checked (its format byte, and lengths that add up to its size); its texts other than
    the host and its lists are read only when the entry is decoded (:func:`decode_frontier`).

    Raises:
        CellError: Not a whole frontier cell of this format.
    """
    try:
        version, _flags, fp, due_ms, *rest = _FRONTIER.unpack_from(raw)
        lengths = rest[-8:]
        if version != FRONTIER or _FRONTIER.size + sum(lengths) != len(raw):
            raise CellError("not a frontier cell")
        at = _FRONTIER.size + lengths[0]
        return intern(_text(raw[at : at + lengths[1]])), due_ms, fp
    except CellError:
        raise
    except (struct.error, ValueError) as exc:  # UnicodeError too
        raise CellError(f"frontier cell does not decode: {exc}") from None


# --- the seen set's discovery cell ---------------------------------------------------------


def encode_queued(url: str, first_seen_ms: int, source: str | None, depth: int | None) -> bytes | None:
    """The ``u:q`` cell of a URL just queued, or None when a value does not fit."""
    if type(first_seen_ms) is not int or not (depth is None or type(depth) is int):
        return None
    try:
        url_b = _utf8(url)
        source_b = b"" if source is None else _utf8(source)
        flags = (_SOURCE if source is not None else 0) | (_DEPTH if depth is not None else 0)
        head = _QUEUED.pack(QUEUED, flags, first_seen_ms, 0 if depth is None else depth, len(url_b), len(source_b))
    except (struct.error, TypeError, AttributeError, UnicodeError, OverflowError):
        return None
    return head + url_b + source_b


def decode_queued(raw: bytes) -> tuple[str, int, str | None, int | None]:
    """``(url, first_seen_ms, source, depth)`` of a binary ``u:q`` cell.

    Raises:
        CellError: Not a whole cell of this format.
    """
    try:
        version, flags, first_seen_ms, depth, n, ns = _QUEUED.unpack_from(raw)
        at = _QUEUED.size
        if version != QUEUED or at + n + ns != len(raw):
            raise CellError("not a seen-set discovery cell")
        url = _text(raw[at : at + n])
        source = _text(raw[at + n :]) if flags & _SOURCE else None
        return url, first_seen_ms, source, depth if flags & _DEPTH else None
    except CellError:
        raise
    except (struct.error, ValueError) as exc:
        raise CellError(f"seen-set cell does not decode: {exc}") from None


# --- the seen set's fetch outcome ---------------------------------------------------------


def encode_outcome(
    url: str, state: str, status: int | None, fetched_at_ms: int | None, checksum: str | None, error: str | None
) -> bytes | None:
    """The ``u:o`` cell of a fetch's outcome, or None when a value does not fit."""
    if not (status is None or type(status) is int) or not (fetched_at_ms is None or type(fetched_at_ms) is int):
        return None
    try:
        url_b, state_b = _utf8(url), _utf8(state)
        checksum_b = b"" if checksum is None else _utf8(checksum)
        error_b = b"" if error is None else _utf8(error)
        flags = (
            (_STATUS if status is not None else 0)
            | (_AT if fetched_at_ms is not None else 0)
            | (_CHECKSUM if checksum is not None else 0)
            | (_ERROR if error is not None else 0)
        )
        head = _OUTCOME.pack(
            OUTCOME,
            flags,
            status or 0,
            fetched_at_ms or 0,
            len(url_b),
            len(state_b),
            len(checksum_b),
            len(error_b),
        )
    except (struct.error, TypeError, AttributeError, UnicodeError, OverflowError):
        return None
    return b"".join((head, url_b, state_b, checksum_b, error_b))


def decode_outcome(raw: bytes) -> tuple[str, str, int | None, int | None, str | None, str | None]:
    """``(url, state, status, fetched_at_ms, checksum, error)`` of a binary ``u:o`` cell.

    Raises:
        CellError: Not a whole cell of this format.
    """
    try:
        version, flags, status, fetched_at_ms, nu, ns, nc, ne = _OUTCOME.unpack_from(raw)
        at = _OUTCOME.size
        state_at = at + nu
        checksum_at = state_at + ns
        error_at = checksum_at + nc
        if version != OUTCOME or error_at + ne != len(raw):
            raise CellError("not a fetch-outcome cell")
        return (
            _text(raw[at:state_at]),
            intern(_text(raw[state_at:checksum_at])),
            status if flags & _STATUS else None,
            fetched_at_ms if flags & _AT else None,
            _text(raw[checksum_at:error_at]) if flags & _CHECKSUM else None,
            _text(raw[error_at:]) if flags & _ERROR else None,
        )
    except CellError:
        raise
    except (struct.error, ValueError) as exc:
        raise CellError(f"fetch-outcome cell does not decode: {exc}") from None


# --- a URL's revisit state (core/policy/change_rate.RevisitState.to_dict()) ---------------

# Its keys (a decoded dict has them in to_dict's order).
_R_KEYS = frozenset((
    "importance", "lam", "prior_rate", "status", "etag", "last_modified", "checksum", "simhash", "visits",
    "changes", "history", "outcomes", "checked_at", "changed_at", "stored_at", "digest", "misses", "errors",
    "moved_to", "next_due", "lastmod_agree", "lastmod_disagree",
))  # fmt: skip


# Each scalar field's type: a value of another type (an int where a float was, a bool) does
# not fit the layout exactly, and is written as JSON.
_R_TYPES = (
    ("importance", float), ("lam", float), ("lastmod_agree", float), ("lastmod_disagree", float),
    ("visits", int), ("changes", int), ("misses", int), ("errors", int), ("outcomes", str),
)  # fmt: skip
_R_OPTIONAL_TYPES = (
    ("prior_rate", float), ("checked_at", float), ("changed_at", float), ("stored_at", float),
    ("next_due", float), ("status", int), ("etag", str), ("last_modified", str), ("checksum", str),
    ("simhash", str), ("digest", str), ("moved_to", str),
)  # fmt: skip


# The optional fields' flag bits: set when the value is present (else None).
_R_OPTIONAL = tuple((name, 1 << i) for i, (name, _) in enumerate(_R_OPTIONAL_TYPES))


def _fits_revisit(d: dict[str, Any]) -> bool:
    history = d["history"]
    return (
        all(type(d[name]) is kind for name, kind in _R_TYPES)
        and all(d[name] is None or type(d[name]) is kind for name, kind in _R_OPTIONAL_TYPES)
        and type(history) is list
        and all(type(h) is list and len(h) == 2 and type(h[0]) is float and type(h[1]) is int for h in history)
    )


def encode_revisit(d: Any) -> bytes | None:
    """A revisit state's dict as a binary cell, or None when it does not fit the layout
    exactly (other keys, or a value of another type: the caller writes JSON)."""
    if type(d) is not dict or d.keys() != _R_KEYS or not _fits_revisit(d):
        return None
    history = d["history"]
    try:
        prior, checked, changed, stored, due, status = (
            d["prior_rate"], d["checked_at"], d["changed_at"], d["stored_at"], d["next_due"], d["status"],
        )  # fmt: skip
        etag, lastmod, checksum, simhash, digest, moved = (
            d["etag"], d["last_modified"], d["checksum"], d["simhash"], d["digest"], d["moved_to"],
        )  # fmt: skip
        flags = sum(bit for name, bit in _R_OPTIONAL if d[name] is not None)
        texts = [b"" if t is None else _utf8(t) for t in (etag, lastmod, checksum, simhash, digest, moved)]
        outcomes = _utf8(d["outcomes"])
        n = len(history)
        head = _REVISIT_HEAD.pack(
            REVISIT, flags, d["importance"], d["lam"], prior or 0.0, checked or 0.0, changed or 0.0,
            stored or 0.0, due or 0.0, d["lastmod_agree"], d["lastmod_disagree"], status or 0, d["visits"],
            d["changes"], d["misses"], d["errors"], *map(len, texts), len(outcomes), n,
        )  # fmt: skip
        tail = struct.pack(f"<{n}d", *[h[0] for h in history]) + bytes([h[1] for h in history]) if n else b""
    except (struct.error, TypeError, ValueError, UnicodeError, OverflowError):  # a kind past 255 too
        return None
    return b"".join((head, *texts, outcomes, tail))


def decode_revisit(raw: bytes) -> dict[str, Any]:
    """The revisit state's dict (to_dict's keys, in its order) of a binary cell.

    Raises:
        CellError: Not a whole cell of this format.
    """
    try:
        (
            version, flags, importance, lam, prior, checked, changed, stored, due, agree, disagree,
            status, visits, changes, misses, errors, ne, nl, nc, ns, nd, nm, no, n,
        ) = _REVISIT_HEAD.unpack_from(raw)  # fmt: skip
        at = _REVISIT_HEAD.size
        end = at + ne + nl + nc + ns + nd + nm + no
        if version != REVISIT or end + 9 * n != len(raw):
            raise CellError("not a revisit-state cell")
        texts = []
        for length in (ne, nl, nc, ns, nd, nm, no):
            texts.append(_text(raw[at : at + length]))
            at += length
        etag, lastmod, checksum, simhash, digest, moved, outcomes = texts
        history = [[i, k] for i, k in zip(struct.unpack_from(f"<{n}d", raw, end), raw[end + 8 * n :])] if n else []
        state = {
            "importance": importance, "lam": lam, "prior_rate": prior, "status": status, "etag": etag,
            "last_modified": lastmod, "checksum": checksum, "simhash": simhash, "visits": visits,
            "changes": changes, "history": history, "outcomes": outcomes, "checked_at": checked,
            "changed_at": changed, "stored_at": stored, "digest": digest, "misses": misses, "errors": errors,
            "moved_to": moved, "next_due": due, "lastmod_agree": agree, "lastmod_disagree": disagree,
        }  # fmt: skip
        for name, bit in _R_OPTIONAL:
            if not flags & bit:
                state[name] = None
        return state
    except CellError:
        raise
    except (struct.error, ValueError) as exc:  # UnicodeError too
        raise CellError(f"revisit-state cell does not decode: {exc}") from None


# --- content-seen and simhash rows ---------------------------------------------------------


def encode_content(
    url: str, kind: str, fetched_at: float | None, digest: str | None, distance: int, round_no: int | None
) -> bytes | None:
    """A ``c:json`` cell (a ``ContentRecord``'s fields), or None when a value does not fit."""
    if (
        not (fetched_at is None or type(fetched_at) is float)
        or type(distance) is not int
        or not (round_no is None or type(round_no) is int)
    ):
        return None
    try:
        url_b, kind_b = _utf8(url), _utf8(kind)
        digest_b = b"" if digest is None else _utf8(digest)
        flags = (
            (_FETCHED if fetched_at is not None else 0)
            | (_DIGEST if digest is not None else 0)
            | (_ROUND if round_no is not None else 0)
        )
        head = _CONTENT.pack(
            CONTENT,
            flags,
            0.0 if fetched_at is None else fetched_at,
            distance,
            0 if round_no is None else round_no,
            len(url_b),
            len(kind_b),
            len(digest_b),
        )
    except (struct.error, TypeError, AttributeError, UnicodeError, OverflowError):
        return None
    return b"".join((head, url_b, kind_b, digest_b))


def decode_content(raw: bytes) -> tuple[str, str, float | None, str | None, int, int | None]:
    """``(url, kind, fetched_at, digest, distance, round)`` of a binary content cell.

    Raises:
        CellError: Not a whole cell of this format.
    """
    try:
        version, flags, fetched_at, distance, round_no, nu, nk, nd = _CONTENT.unpack_from(raw)
        at = _CONTENT.size
        end = at + nu + nk
        if version != CONTENT or end + nd != len(raw):
            raise CellError("not a content cell")
        return (
            _text(raw[at : at + nu]),
            _text(raw[at + nu : end]),
            fetched_at if flags & _FETCHED else None,
            _text(raw[end:]) if flags & _DIGEST else None,
            distance,
            round_no if flags & _ROUND else None,
        )
    except CellError:
        raise
    except (struct.error, ValueError) as exc:
        raise CellError(f"content cell does not decode: {exc}") from None


def encode_simhash_named(url: str, round_no: int | None) -> bytes | None:
    """The first simhash table's cell (it names the original), or None when it does not fit."""
    if not (round_no is None or type(round_no) is int):
        return None
    try:
        url_b = _utf8(url)
        return _SIMHASH.pack(SIMHASH_NAMED, 0 if round_no is None else _ROUND, round_no or 0, len(url_b)) + url_b
    except (struct.error, AttributeError, UnicodeError, OverflowError):
        return None


def decode_simhash(raw: bytes) -> tuple[str | None, int | None]:
    """``(url, round)`` of a binary simhash cell; both None in the cells of the other
    tables (the first table's names the original and its round).

    Raises:
        CellError: Not a whole cell of this format.
    """
    try:
        if raw == SIMHASH_SEEN_CELL:
            return None, None
        version, flags, round_no, n = _SIMHASH.unpack_from(raw)
        if version != SIMHASH_NAMED or _SIMHASH.size + n != len(raw):
            raise CellError("not a simhash cell")
        return _text(raw[_SIMHASH.size :]), round_no if flags & _ROUND else None
    except CellError:
        raise
    except (struct.error, ValueError, IndexError) as exc:
        raise CellError(f"simhash cell does not decode: {exc}") from None


# --- host clocks ---------------------------------------------------------------------------


def encode_clock(at: float, end: float, delay: float, not_before: float, errors: int = 0) -> bytes | None:
    """A host clock cell (four times and delays in seconds, each read as a float, and the
    host's errors in a row, written only when there are any), or None when one is not a
    value its field holds (the caller writes JSON)."""
    try:
        if errors:
            if type(errors) is not int:
                return None
            return _CLOCK_ERRORS.pack(CLOCK_ERRORS, at, end, delay, not_before, errors)
        return _CLOCK.pack(CLOCK, at, end, delay, not_before)
    except (struct.error, TypeError, OverflowError):
        return None


def decode_clock(raw: bytes) -> tuple[float, float, float, float]:
    """``(at, end, delay, not_before)`` of a binary host clock cell (not checked for NaN or
    infinity: the reader decides what a clock may say).

    Raises:
        CellError: Not a whole cell of this format.
    """
    return decode_clock_errors(raw)[:4]


def decode_clock_errors(raw: bytes) -> tuple[float, float, float, float, int]:
    """:func:`decode_clock`'s values and the host's errors in a row (0 where none are written).

    Raises:
        CellError: Not a whole cell of this format.
    """
    if len(raw) == _CLOCK.size and raw[0] == CLOCK:
        _, at, end, delay, not_before = _CLOCK.unpack(raw)
        return at, end, delay, not_before, 0
    if len(raw) == _CLOCK_ERRORS.size and raw[0] == CLOCK_ERRORS:
        _, at, end, delay, not_before, errors = _CLOCK_ERRORS.unpack(raw)
        return at, end, delay, not_before, errors
    raise CellError("not a host clock cell")
