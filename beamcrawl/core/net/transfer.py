"""Bounded work per response body: a minimum transfer rate, a size cap, and capped decompression.

docs/ARCHITECTURE.md §3, "Bounded work per input": every fetch has a connect timeout, a total timeout, a
minimum transfer rate and a size cap. The timeouts are aiohttp's (``ClientTimeout``); this
module adds the other two, for the body, plus the cap on what a compressed body may expand to.

* :func:`read_body` reads a response body chunk by chunk and gives up on a *slow-drip*
  server: one that, after a grace period, has averaged fewer than ``min_rate`` bytes a second,
  or that sent nothing for ``stall`` seconds. Such servers (tarpits, overloaded hosts) would
  otherwise hold one of a host's turns, and the fetch loop's attention, for the full total
  timeout. It waits only as long as the rule allows: each wait ends at the moment the average
  would drop below the minimum if no further byte came, so a dripping server is cut within
  milliseconds of the rule failing, not at the next poll.
* :class:`CappedDecoder` undoes ``Content-Encoding`` (gzip, deflate, and brotli when a brotli
  binding with an output limit is installed) as the bytes arrive, never producing more than
  its cap: a 2 MiB gzip bomb (2 GiB of zeros) costs 2 MiB of input and ``cap`` of output, and
  the transfer can be stopped as soon as the cap is reached. :func:`decode_content` is the
  same for a body already in memory. A transfer coding other than ``chunked``
  (``Transfer-Encoding: gzip, chunked``) is undone the same way (the HTTP client only undoes
  ``chunked``), first, into the entity the WARC record holds; then the content codings.

Brotli is only used through a binding whose ``Decompressor.process`` takes an
``output_buffer_limit`` (brotli >= 1.2, brotlicffi >= 1.2): older ones can only decompress a
chunk in full, which a bomb turns into gigabytes. :data:`ACCEPT_ENCODING` advertises ``br``
only when such a binding is importable, so servers send nothing we cannot decode safely.

Nothing here imports Beam; asyncio and aiohttp's ``StreamReader`` interface only.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

__all__ = [
    "ACCEPT_ENCODING",
    "BROTLI",
    "BadFraming",
    "CappedDecoder",
    "Decoded",
    "UnsupportedEncoding",
    "decode_content",
    "read_body",
    "transfer_codings",
    "warc_truncated",
]


def _load_brotli() -> Any:
    """A brotli binding whose decompressor can limit its output, or None."""
    for name in ("brotli", "brotlicffi"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        try:
            module.Decompressor().process(b"", output_buffer_limit=1)
        except TypeError:  # too old: no output limit, so no bomb protection
            continue
        except Exception:  # noqa: BLE001 - any other answer to an empty input still means "supported"
            pass
        if hasattr(module.Decompressor(), "can_accept_more_data"):
            return module
    return None


#: The brotli module used, or None when no binding with an output limit is installed.
BROTLI: Any = _load_brotli()
#: What the fetcher should send as ``Accept-Encoding``: only what :class:`CappedDecoder` decodes.
ACCEPT_ENCODING = "gzip, deflate, br" if BROTLI is not None else "gzip, deflate"

READ_CHUNK = 64 * 1024


class _Content(Protocol):
    """The part of :class:`aiohttp.StreamReader` that :func:`read_body` uses."""

    async def readany(self) -> bytes: ...

    def read_nowait(self, n: int = -1) -> bytes: ...

    def is_eof(self) -> bool: ...


# --- the body, at a minimum rate --------------------------------------------------------------


async def read_body(
    content: _Content,
    cap: int,
    min_rate: float,
    grace: float,
    *,
    stall: float = 0.0,
    clock: Callable[[], float] = time.monotonic,
    on_chunk: Callable[[bytes], bool] | None = None,
) -> tuple[bytes, str | None]:
    """Reads a body up to ``cap`` bytes, giving up on a server that sends too slowly.

    Args:
        content: The response's stream (``ClientResponse.content``).
        cap: Most bytes kept; reading stops when more arrive.
        min_rate: Least average bytes per second, counted from the start of the body, once
            ``grace`` seconds have passed. 0 turns the rule off.
        grace: Seconds before the rate is judged (slow starts, TCP slow start, small bodies).
        stall: Most seconds without a single byte (0 = off; the rate rule still applies).
        clock: Monotonic seconds (injectable for tests).
        on_chunk: Called with each chunk kept; returning False stops reading early (the
            decompression cap is reached, say) with reason ``"length"``.

    Returns:
        ``(body, reason)``: reason is None when the body ended, ``"length"`` when the cap (or
        ``on_chunk``) cut it, ``"slow"`` when the rate or stall rule did. The caller should
        close the connection after a cut rather than drain it.

    Raises:
        Whatever the stream raises for a broken connection (``aiohttp.ClientPayloadError``)
        or the request's own timeout (``asyncio.TimeoutError``) — except when the rate rule's
        own wait ran out, which is reported as ``"slow"``.
    """
    chunks: list[bytes] = []
    size = 0
    start = last = clock()
    while True:
        now = clock()
        deadline = float("inf")
        if stall > 0:
            deadline = last + stall
        if min_rate > 0:
            # The moment the average would fall below min_rate if nothing more came.
            deadline = min(deadline, start + max(grace, size / min_rate))
        wait = deadline - now
        if wait <= 0:
            return b"".join(chunks), "slow"
        # What has arrived already is taken without waiting: most bodies come with their
        # headers, and waiting with a timeout makes a task and a timer per call (some 30 µs
        # a page in the fetch loop, which is what a page costs the floor crawler in all).
        data = content.read_nowait()
        if not data:
            if content.is_eof():
                return b"".join(chunks), None
            try:
                if wait == float("inf"):
                    data = await content.readany()
                else:
                    data = await asyncio.wait_for(content.readany(), wait)
            except asyncio.TimeoutError:
                # Ours, unless the caller's own deadline also passed (then it is still too slow).
                return b"".join(chunks), "slow"
            if not data:
                return b"".join(chunks), None
        last = clock()
        if size + len(data) > cap:
            piece = data[: cap - size]
            if piece and on_chunk is not None:
                on_chunk(piece)
            chunks.append(piece)
            return b"".join(chunks), "length"
        chunks.append(data)
        size += len(data)
        if on_chunk is not None and on_chunk(data) is False:
            return b"".join(chunks), "length"


def warc_truncated(reason: str | None) -> str | None:
    """The ``WARC-Truncated`` value (WARC 1.1 §5.13) for a :func:`read_body` reason.

    ``"slow"`` is the standard's ``"time"`` (the record "exceeds configured max time"); the
    standard has no word for a slow transfer, and readers only know its four values.
    """
    if reason is None:
        return None
    return {"length": "length", "slow": "time"}.get(reason, "unspecified")


# --- Content-Encoding, capped -----------------------------------------------------------------


class UnsupportedEncoding(ValueError):
    """A Content-Encoding this module does not decode (the body is kept as sent)."""


class _ZlibStage:
    """A zlib decoder under an output limit. Input past a limit waits in zlib's
    ``unconsumed_tail`` and is decoded, before new input, at the next call: with stacked
    codings a stage before the last can reach its limit while the body is still under the cap.
    """

    _d: Any
    _flushed = False  # zlib's flush ends the stream: nothing may be asked of it after

    def process(self, data: bytes, limit: int) -> bytes:
        raise NotImplementedError

    def flush(self, limit: int) -> bytes:
        """The end of the stream, at most ``limit`` bytes. Held input is decoded first under
        the limit; zlib's ``flush`` runs only then, with its default buffer (its argument is
        no limit but a buffer allocated whole: the body cap's size, at every body's end)."""
        if limit <= 0 or self._flushed:
            return b""
        out = self.process(b"", limit)
        if len(out) < limit and not self._d.unconsumed_tail:
            out += self._d.flush()
            self._flushed = True
        return out

    @property
    def complete(self) -> bool:
        return bool(self._d.eof)


class _Gzip(_ZlibStage):
    """gzip (also several concatenated members, RFC 1952 §2.2) with a zlib header allowed."""

    def __init__(self) -> None:
        self._d = zlib.decompressobj(47)  # 32 + 15: gzip or zlib header, detected

    def process(self, data: bytes, limit: int) -> bytes:
        out = self._d.decompress(self._d.unconsumed_tail + data, limit)
        while self._d.eof and self._d.unused_data and len(out) < limit:
            rest = self._d.unused_data
            if not rest.lstrip(b"\x00"):
                break  # zero padding after the last member, which some servers send
            self._d = zlib.decompressobj(47)
            out += self._d.decompress(rest, limit - len(out))
        return out


class _Deflate(_ZlibStage):
    """HTTP "deflate": zlib-wrapped per RFC 9110, or raw deflate as some servers send it."""

    def __init__(self) -> None:
        self._d = zlib.decompressobj(15)
        self._started = False

    def process(self, data: bytes, limit: int) -> bytes:
        if not self._started and data:
            self._started = True
            try:
                return self._d.decompress(data, limit)
            except zlib.error:
                self._d = zlib.decompressobj(-15)  # no zlib header: raw deflate
        return self._d.decompress(self._d.unconsumed_tail + data, limit)


class _Brotli:
    def __init__(self) -> None:
        self._d = BROTLI.Decompressor()
        self._held = b""  # input given while the decoder still held output past a limit

    def process(self, data: bytes, limit: int) -> bytes:
        self._held += data
        out = b""
        while len(out) < limit:
            # With a limit reached, the rest of the last input is still pending inside: it
            # must be drained with empty input before more may be given.
            if not self._d.can_accept_more_data():
                more = self._d.process(b"", output_buffer_limit=limit - len(out))
                if not more:
                    break
            elif self._held:
                held, self._held = self._held, b""
                more = self._d.process(held, output_buffer_limit=limit - len(out))
            else:
                break
            out += more
        return out

    def flush(self, limit: int) -> bytes:
        return self.process(b"", limit) if limit > 0 else b""

    @property
    def complete(self) -> bool:
        return bool(self._d.is_finished())


_CODERS: dict[str, Callable[[], Any]] = {"gzip": _Gzip, "x-gzip": _Gzip, "deflate": _Deflate}
if BROTLI is not None:
    _CODERS["br"] = _Brotli


def _codings(encoding: str | None) -> list[str]:
    """The Content-Encoding's codings in the order to undo them (last applied first)."""
    names = [c.strip().lower() for c in (encoding or "").split(",")]
    return [c for c in reversed(names) if c and c != "identity"]


class BadFraming(ValueError):
    """A Transfer-Encoding whose ``chunked`` is not the last coding of its list."""


def transfer_codings(transfer_encodings: Sequence[str]) -> str:
    """The transfer codings a body still has once the HTTP client has undone ``chunked``,
    as one list for :class:`CappedDecoder`.

    The client undoes ``chunked`` only when it is the final coding (RFC 9112 §6.3: a body
    whose final coding is another is read to the close, its chunks left as they are). A list
    that names ``chunked`` anywhere else (``chunked, gzip``, ``chunked`` then a line
    ``gzip``), or holds an empty element (``chunked,``, which the client does not read as
    chunked either), leaves chunk framing in the body that no step here undoes, and the WARC
    record would hold it as the page: no list of the body's codings is given for it.
    ``chunked`` named more than once at the end (``chunked, chunked``) is read as once, as
    the client reads it (a sender applies it once at most, RFC 9112 §7).

    Args:
        transfer_encodings: Every ``Transfer-Encoding`` field line, in order.

    Raises:
        BadFraming: ``chunked`` named, and not as the last of a list without empty
            elements.
    """
    elements = [e.strip(" \t") for line in transfer_encodings for e in line.split(",")]
    lowered = [e.lower() for e in elements]
    if "chunked" in lowered:
        first = lowered.index("chunked")
        if any(e != "chunked" for e in lowered[first:]) or not all(elements):
            raise BadFraming(f"chunked is not the last transfer coding of {', '.join(transfer_encodings)!r}")
    return ", ".join(e for e, low in zip(elements, lowered) if e and low != "chunked")


class CappedDecoder:
    """Undoes a Content-Encoding incrementally without ever producing more than ``cap`` bytes.

    Feed it the raw chunks as they arrive; read :attr:`truncated` after each to stop the
    transfer early. Stacked codings (``Content-Encoding: gzip, br``) are undone in turn, each
    stage capped.

    Raises:
        UnsupportedEncoding: From the constructor, for a coding it cannot undo (``br`` without
            a safe brotli binding, ``zstd``, ``compress``, anything unknown).
    """

    def __init__(self, encoding: str | None, cap: int) -> None:
        self.cap = cap
        self.size = 0
        self.truncated = False
        self.error: str | None = None
        self._stages: list[Any] = []
        for coding in _codings(encoding):
            factory = _CODERS.get(coding)
            if factory is None:
                raise UnsupportedEncoding(f"unsupported Content-Encoding {coding!r}")
            self._stages.append(factory())

    @property
    def stages(self) -> int:
        """How many codings are undone (0 for identity: the bytes are only capped)."""
        return len(self._stages)

    @property
    def complete(self) -> bool:
        """Every coding reached its end of stream (not so for a body cut off in transfer)."""
        return all(stage.complete for stage in self._stages)

    @property
    def done(self) -> bool:
        """No more input is useful: the cap was reached or the stream is corrupt."""
        return self.truncated or self.error is not None

    def _run(self, data: bytes, final: bool) -> tuple[bytes, bool]:
        """The last stage's output, and whether any stage gave any."""
        moved = False
        for stage in self._stages:
            # Each stage may produce one byte past the cap: that byte is how a cut is noticed.
            limit = self.cap - self.size + 1
            out = stage.process(data, limit) if data else b""
            if final and len(out) < limit:
                out += stage.flush(limit - len(out))
            moved = moved or bool(out)
            data = out
        return data, moved

    def feed(self, chunk: bytes) -> bytes:
        """Decodes one raw chunk; returns the new payload bytes (nothing once :attr:`done`)."""
        if self.done or not chunk:
            return b""
        try:
            out, _ = self._run(chunk, final=False)
        except Exception as exc:  # noqa: BLE001 - zlib.error, brotli.error: a corrupt stream
            self.error = f"{type(exc).__name__}: {exc}"[:200]
            return b""
        return self._take(out)

    def finish(self) -> bytes:
        """Flushes what the decoders still hold at the end of the body."""
        parts = []
        # A stage before the last may still hold input its limit kept back: the stages run
        # again until none gives more (or the cap is reached).
        while not self.done:
            try:
                out, moved = self._run(b"", final=True)
            except Exception as exc:  # noqa: BLE001
                self.error = f"{type(exc).__name__}: {exc}"[:200]
                break
            parts.append(self._take(out))
            if not moved:
                break
        return b"".join(parts)

    def _take(self, out: bytes) -> bytes:
        room = self.cap - self.size
        if len(out) > room:
            out = out[:room]
            self.truncated = True
        self.size += len(out)
        return out


class Decoded(NamedTuple):
    """A decoded body.

    Attributes:
        body: The payload (at most the cap); the raw bytes when decoding failed or the coding
            is unsupported, so nothing is lost (:func:`sniff` then sees gzip bytes, not HTML).
        truncated: The cap cut the payload.
        error: Why decoding failed, or None.
    """

    body: bytes
    truncated: bool
    error: str | None


def decode_content(raw: bytes, encoding: str | None, cap: int) -> Decoded:
    """Undoes ``Content-Encoding`` on a whole body, producing at most ``cap`` bytes.

    A drop-in for the fetcher's ``decode_body`` (which has no output limit for brotli).

    Args:
        raw: The body as transferred.
        encoding: The Content-Encoding header (None or ``identity`` = as is).
        cap: Most payload bytes.
    """
    try:
        decoder = CappedDecoder(encoding, cap)
    except UnsupportedEncoding as exc:
        return Decoded(raw, False, str(exc))
    if not decoder.stages:
        return Decoded(raw[:cap], len(raw) > cap, None)
    parts = []
    # Fed in slices so that a stacked or brotli stage never sees a huge input at once.
    for i in range(0, len(raw), READ_CHUNK):
        parts.append(decoder.feed(raw[i : i + READ_CHUNK]))
        if decoder.done:
            break
    parts.append(decoder.finish())
    if decoder.error is not None:
        return Decoded(raw, False, decoder.error)
    return Decoded(b"".join(parts), decoder.truncated, None)
