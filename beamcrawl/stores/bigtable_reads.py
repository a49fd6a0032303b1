"""ReadRows on plain protobuf: the response chunks merged into rows, and a read resumed
where a broken stream left it.

Why not the data client's ``read_rows``: its client side cost 75-95 µs of CPU a response
message here (the emulator sends one message a row, Cloud Bigtable packs several), most of
it grpc's default streaming, where every message is handed from the channel's thread to
the caller's under a lock, the rest proto-plus objects and the row merging around them.
The store's reads go over the generated client's channel instead, opened with grpc's
``SingleThreadedUnaryStream`` option (the stream is read on the calling thread), and the
responses are parsed as plain protobuf messages (bench/README.md, "ReadRows on the calling
thread": 10,000 keys read back in 0.12-0.16 s against 0.97-1.10 s).

The merge follows the ReadRows protocol (``google.bigtable.v2.ReadRowsResponse.CellChunk``):

- a row starts with a chunk that names its key, family and qualifier; a later chunk of the
  row names a family only with a qualifier, and a qualifier or key only when it changes
  (the key may not);
- a cell whose chunk has ``value_size > 0`` is split: the following chunks carry the rest
  of its value, up to one with ``value_size == 0``; they may not change the cell's key,
  family, qualifier, timestamp or labels;
- ``reset_row`` (a chunk with nothing else) drops the row in progress; ``commit_row`` ends
  it, never inside a split cell;
- committed keys strictly increase, and so does ``last_scanned_row_key``, the server's
  word that nothing at or before that key is still to come;
- a stream that ends inside a row is broken.

A chunk stream that breaks a rule raises :class:`InvalidChunk`; it is a server's or a
proxy's fault, not something to read past.

Each row is ``(key, cells)`` as the store interface gives it: ``{"family:qualifier":
value}``, the first version of each column (Bigtable sends a column's newest version
first), the qualifier decoded as UTF-8 with ``surrogateescape``; keys only, ``{}``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import grpc
from google.api_core import exceptions as api_exceptions
from google.cloud.bigtable_v2.types import bigtable as _bigtable_types
from google.cloud.bigtable_v2.types import data as _data_types

__all__ = [
    "CHANNEL_OPTIONS",
    "READ_ROWS_METHOD",
    "RETRYABLE_READ_CODES",
    "STREAM_ON_CALLER",
    "InvalidChunk",
    "ReadRowsRequest",
    "ReadRowsResponse",
    "RowMerger",
    "keys_only_filter",
    "latest_filter",
    "read_rows",
    "revise_request",
]

ReadRowsRequest: Any = _bigtable_types.ReadRowsRequest.pb()
ReadRowsResponse: Any = _bigtable_types.ReadRowsResponse.pb()
_RowFilter: Any = _data_types.RowFilter.pb()
_RowSet: Any = _data_types.RowSet.pb()
_RowRange: Any = _data_types.RowRange.pb()

READ_ROWS_METHOD = "/google.bigtable.v2.Bigtable/ReadRows"

#: The channel option that reads a server stream on the calling thread (grpc's default
#: hands each message over from the channel's own thread).
STREAM_ON_CALLER: tuple[str, Any] = (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)
#: Options of the channel the store reads over: :data:`STREAM_ON_CALLER`, and messages of
#: any size, as the generated client's own channel has.
CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    STREAM_ON_CALLER,
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
]

#: Status codes after which a read is resumed: DEADLINE_EXCEEDED (an attempt's time ran
#: out), RESOURCE_EXHAUSTED (throttled), ABORTED, INTERNAL (a stream reset on the way) and
#: UNAVAILABLE.
RETRYABLE_READ_CODES = frozenset(
    {
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
    }
)


class InvalidChunk(ValueError):
    """A ReadRows response that breaks the chunk protocol; the message says which rule."""


def latest_filter() -> Any:
    """The newest version of every column (correct before garbage collection has run)."""
    return _RowFilter(cells_per_column_limit_filter=1)


def keys_only_filter() -> Any:
    """One cell a row with its value stripped: only keys cross the network."""
    f = _RowFilter()
    f.chain.filters.add().cells_per_row_limit_filter = 1
    f.chain.filters.add().strip_value_transformer = True
    return f


class RowMerger:
    """Merges a read's response messages into rows, across the attempts of one read.

    Attributes:
        progress: The last key the read is done with (the last committed row, or a later
            ``last_scanned_row_key``), or None: a resumed attempt asks only for what comes
            after it.
        rows: Rows committed so far over all attempts.
    """

    def __init__(self, *, keys_only: bool) -> None:
        self.keys_only = keys_only
        self.progress: bytes | None = None
        self.rows = 0

    def merge(self, responses: Iterable[Any]) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        """Yields the committed rows of one attempt's responses.

        Raises:
            InvalidChunk: The chunks break the protocol (the module's docstring).
        """
        keys_only = self.keys_only
        key: bytes | None = None  # the row in progress
        cells: dict[str, bytes] = {}
        family: str | None = None
        qualifier: bytes | None = None
        pieces: list[bytes] | None = None  # a split cell's value so far
        timestamp = 0
        labels: list[str] = []
        for response in responses:
            for c in response.chunks:
                if c.reset_row:
                    if key is None:
                        raise InvalidChunk("reset_row outside a row")
                    if (
                        c.row_key
                        or c.HasField("family_name")
                        or c.HasField("qualifier")
                        or c.timestamp_micros
                        or c.labels
                        or c.value
                        or c.value_size
                        or c.commit_row
                    ):
                        raise InvalidChunk("reset_row with data")
                    key, cells, family, qualifier, pieces = None, {}, None, None, None
                    continue
                if pieces is not None:  # the rest of a split cell
                    if c.row_key and c.row_key != key:
                        raise InvalidChunk("row key changed within a cell")
                    if c.HasField("family_name") and c.family_name.value != family:
                        raise InvalidChunk("family changed within a cell")
                    if c.HasField("qualifier") and c.qualifier.value != qualifier:
                        raise InvalidChunk("qualifier changed within a cell")
                    if c.timestamp_micros and c.timestamp_micros != timestamp:
                        raise InvalidChunk("timestamp changed within a cell")
                    if c.labels and list(c.labels) != labels:
                        raise InvalidChunk("labels changed within a cell")
                    pieces.append(c.value)
                else:
                    if key is None:
                        if not c.row_key:
                            raise InvalidChunk("a row's first chunk has no key")
                        if self.progress is not None and c.row_key <= self.progress:
                            raise InvalidChunk("row keys out of order")
                        key = c.row_key
                        family = qualifier = None
                    elif c.row_key and c.row_key != key:
                        raise InvalidChunk("row key changed within a row")
                    if c.HasField("family_name"):
                        if not c.HasField("qualifier"):
                            raise InvalidChunk("a new family without a qualifier")
                        family = c.family_name.value
                    if c.HasField("qualifier"):
                        if family is None:
                            raise InvalidChunk("a qualifier without a family")
                        qualifier = c.qualifier.value
                    if family is None or qualifier is None:
                        raise InvalidChunk("a cell without a family or qualifier")
                    timestamp = c.timestamp_micros
                    labels = list(c.labels) if c.labels else []
                    pieces = [c.value]
                if c.value_size > 0:
                    if c.commit_row:
                        raise InvalidChunk("commit_row within a split cell")
                    continue
                if not keys_only:
                    assert qualifier is not None
                    name = f"{family}:{qualifier.decode('utf-8', 'surrogateescape')}"
                    if name not in cells:  # a column's newest version comes first
                        cells[name] = pieces[0] if len(pieces) == 1 else b"".join(pieces)
                pieces = None
                if c.commit_row:
                    assert key is not None
                    row = (key, {} if keys_only else cells)
                    self.progress, self.rows = key, self.rows + 1
                    key, cells, family, qualifier = None, {}, None, None
                    yield row
            scanned = response.last_scanned_row_key
            if scanned:
                if self.progress is not None and scanned <= self.progress:
                    raise InvalidChunk("last_scanned_row_key out of order")
                if key is not None and scanned >= key:
                    raise InvalidChunk("last_scanned_row_key within a row")
                self.progress = scanned
        if key is not None or pieces is not None:
            raise InvalidChunk("the stream ended within a row")


def revise_request(request: Any, after: bytes) -> Any | None:
    """``request`` narrowed to the keys after ``after``, for the next attempt; None when
    none of its row set is left. An empty row set (the whole table) becomes ``(after, ∞)``.
    """
    revised = ReadRowsRequest()
    revised.CopyFrom(request)
    rows = request.rows
    if not rows.row_keys and not rows.row_ranges:
        revised.rows.row_ranges.add().start_key_open = after
        return revised
    revised.ClearField("rows")
    revised.rows.row_keys.extend(k for k in rows.row_keys if k > after)
    for r in rows.row_ranges:
        # An empty bound is no bound, as Bigtable reads it.
        end = r.end_key_open or r.end_key_closed
        if end and end <= after:
            continue  # all of it at or before ``after``
        kept = revised.rows.row_ranges.add()
        kept.CopyFrom(r)
        start = r.start_key_closed or r.start_key_open
        if not start or start <= after:
            kept.start_key_open = after
    if not revised.rows.row_keys and not revised.rows.row_ranges:
        return None
    return revised


def read_rows(
    call: Callable[..., Any],
    request: Any,
    *,
    keys_only: bool,
    metadata: list[tuple[str, str]],
    attempt_timeout: float,
    timeout: float,
    backoff: tuple[float, float] = (0.05, 5.0),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[tuple[bytes, dict[str, bytes]]]:
    """The rows of one ReadRows ``request``, resumed after a transient failure.

    A failed attempt with a code in :data:`RETRYABLE_READ_CODES` is followed, after an
    exponential back-off, by one that asks only for what comes after the read's progress
    (:func:`revise_request`) and for the rows a limit still allows; a row cut off by the
    failure is read whole again. Each attempt may take ``attempt_timeout`` seconds and the
    read ``timeout`` in all. A stream is cancelled when the caller stops reading.

    Args:
        call: The ReadRows multi-callable (``channel.unary_stream``), taking the plain
            request message and giving plain response messages.
        request: A :data:`ReadRowsRequest`; not changed.
        keys_only: Rows as ``(key, {})``.
        metadata: Call metadata (the routing header).
        attempt_timeout: Seconds one attempt may take.
        timeout: Seconds the read may take over all its attempts.
        backoff: The first wait between attempts and the longest, in seconds.

    Raises:
        google.api_core.exceptions.GoogleAPIError: A failure not worth another attempt,
            or the last one when the time ran out.
        InvalidChunk: The responses break the chunk protocol.
    """
    merger = RowMerger(keys_only=keys_only)
    limit = request.rows_limit
    deadline = clock() + timeout
    delay, longest = backoff
    attempt: Any = request
    while True:
        left = deadline - clock()
        stream = call(attempt, timeout=max(0.001, min(attempt_timeout, left)), metadata=metadata)
        try:
            yield from merger.merge(stream)
            return
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if code not in RETRYABLE_READ_CODES or clock() + delay >= deadline:
                raise api_exceptions.from_grpc_error(exc) from exc
        finally:
            stream.cancel()
        sleep(delay * random.uniform(0.5, 1.0))
        delay = min(delay * 2, longest)
        if merger.progress is not None:
            revised = revise_request(request, merger.progress)
            if revised is None:
                return
            attempt = revised
        if limit:
            if merger.rows >= limit:
                return
            if attempt is request:
                attempt = ReadRowsRequest()
                attempt.CopyFrom(request)
            attempt.rows_limit = limit - merger.rows
