"""A host's clock written ahead: the ``r:clock`` cell of its ``hosts`` row, recorded before
each request the fetch loop sends, so that a round that fails, is killed or is rerun mid-host
never asks the host again before its delay has passed since the last request actually sent.

The host record (``r:json``) is written when the fetch loop has finished the host; a request
sent after it was read at the round's start is known only from this cell. The cell says when
the request went out at the latest (``at``: written before it, a little ahead of the clock, and
the request is not sent past it), the end of the response before it, and the delay,
``not_before`` and errors in a row in force then (a Crawl-delay learnt this round, a
Retry-After, a back-off and the failures that count toward the next). A
reader merges it into the record only when it is newer than what the record knows
(:func:`merge_clock`); the request's own end is unknown, so its start stands for it. After a
robots.txt redirect hop's answer the target's cell is written again, ``at`` the answer's end
with the holds it set (a Retry-After) and its errors in a row (a hop answered with a 5xx
every round is backed off as a planned host is): no host record of the loop carries a host
it has no plan for.

The cell is written before every request, so it is binary (``schemas/cells.py``, format 0x08:
the four values as doubles, 33 bytes; format 0x0B where the host has errors in a row, the
count a 64-bit int after them); cells written as a JSON object before still read.
"""

from __future__ import annotations

import json
import math
from typing import Mapping

from beamcrawl.schemas import cells as cellfmt
from beamcrawl.schemas.records import HostRecord

CLOCK_CELL = "r:clock"
# How far ahead of the clock the written request time is: the request goes out before it or
# not at all (core/net/fetcher.py sends it only if the write landed in time), so the cell is a
# time no earlier than the request's actual start.
CLOCK_AHEAD = 0.5


def clock_cells(record: HostRecord, at: float, delay: float) -> dict[str, bytes]:
    """The cell recorded before a request to ``record.host`` that goes out no later than ``at``
    under ``delay`` (seconds)."""
    end, delay, not_before = record.last_fetch_end, max(delay, record.delay), record.not_before
    errors = record.consecutive_errors
    raw = cellfmt.encode_clock(at, end, delay, not_before, errors)
    if raw is None:  # a huge int: as JSON, which the reader ignores as it did
        value = {"at": at, "end": end, "delay": delay, "not_before": not_before, "errors": errors}
        raw = json.dumps(value, separators=(",", ":")).encode()
    return {CLOCK_CELL: raw}


def merge_clock(record: HostRecord, cells: Mapping[str, bytes] | None) -> HostRecord:
    """``record`` with the clock cell of its row merged in, where that cell tells of a request
    the record does not know (sent after the record was read: the round that sent it did not
    finish the host). Returns ``record`` itself, updated in place; a cell that does not decode
    is ignored (the record alone is what the crawler had before this cell existed)."""
    raw = (cells or {}).get(CLOCK_CELL)
    if raw is None:
        return record
    try:
        if cellfmt.is_binary(raw):
            at, end, delay, not_before, errors = cellfmt.decode_clock_errors(raw)
        else:
            clock = json.loads(raw)
            at = float(clock["at"])
            end = float(clock.get("end", 0.0))
            delay = float(clock.get("delay", 0.0))
            not_before = float(clock.get("not_before", 0.0))
            errors = clock.get("errors", 0)
            if type(errors) is not int:
                errors = 0
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError):
        return record
    if not all(math.isfinite(v) for v in (at, end, delay, not_before)):
        return record  # "NaN" or "Infinity" decode as floats; no clock says either
    if at <= record.last_fetch_end:  # the record was written after that request ended
        return record
    record.last_fetch_end = max(at, end)
    record.delay = max(record.delay, delay)
    record.not_before = max(record.not_before, not_before)
    if at <= end:
        # Written after an answer (a robots.txt hop's, StoreFence.record_clock): its errors
        # in a row are the host's now. One written before a request holds those before it,
        # which a record written after a quick answer (its end before ``at``, written ahead)
        # knows better: the record's count stands, as it did before cells held one.
        record.consecutive_errors = max(0, errors)
    return record


def read_host(host: str, cells: Mapping[str, bytes] | None) -> HostRecord:
    """The host record a ``hosts`` row holds, its clock cell merged in. A row with a clock
    cell only (a host a robots.txt redirect led to, never planned itself, or one whose first
    round did not finish it) is a new host's record with that clock."""
    record_cells = {k: v for k, v in (cells or {}).items() if k != CLOCK_CELL}
    return merge_clock(HostRecord.from_cells(host, dict(record_cells) or None), cells)
