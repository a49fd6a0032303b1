"""The HTTP client's wire discipline: one request sent per request planned, one answer per
request, and the request target sent the one planned.

Left to itself, aiohttp does three things a polite crawler that archives what it is served
cannot allow (seen on a hostile web, docs/ARCHITECTURE.md §3 "Politeness"):

- when a connection is closed or reset before the answer (a reset after part of the
  headers, a close before any byte, a ``100 Continue`` and then a close), it sends the
  request again by itself on a new connection. The server sees two requests a millisecond
  apart, the crawler counts one, and the host's delay is not kept. :func:`no_retry` (a
  client middleware) turns those errors into :class:`AnswerLost`, which aiohttp passes to
  the caller as it is: the lost answer is an outcome of that fetch, and any retry is the
  scheduler's, after the host's delay;
- on a kept-alive connection, bytes that arrive while no request is waiting for an answer
  (a second, unrequested response sent after the real one) are parsed and queued, and
  handed to the *next* request as its answer: a page archived under a URL it was not served
  for. :class:`OneAnswerConnector` makes its connections with :class:`OneAnswerProtocol`,
  which closes a pooled connection the moment a byte arrives on it, so the next request
  goes out on a fresh connection and its answer is read from there. Bytes left over inside
  one read, after the end of a response, make aiohttp itself refuse to pool the connection.
  An HTTP/1.0 answer with Transfer-Encoding, which aiohttp pools when it says keep-alive,
  closes its connection too (:class:`OneAnswerProtocol`);
- given a URL as a string, it re-quotes it before it writes the request line: it decodes the
  escapes of characters it deems safe where they stand (``%40`` to ``@``, ``%3A`` to ``:``,
  ``%41`` to ``A``, and in a query ``%2F`` and ``%3F`` to ``/`` and ``?``) and upper-cases
  the rest. The server is then asked for another target than the URL the crawler checked
  against robots.txt, keeps in its frontier and writes in the WARC request record, and an
  escaped reserved character is not the character (RFC 3986 §2.2: ``?next=%2Fa%3Fb%3D1`` is
  one parameter, ``?next=/a?b%3D1`` a different string). :func:`request_url` gives the
  client the URL as the crawler holds it, to be sent byte for byte.

Keep-alive itself stays: a connection that is idle and quiet is reused, which saves a
TCP (and TLS) handshake per page on a host with many pages.

Nothing here imports Beam.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.http import HttpVersion11
from yarl import URL

if TYPE_CHECKING:
    from aiohttp import ClientRequest, ClientResponse
    from aiohttp.client_middlewares import ClientHandlerType
    from aiohttp.client_reqrep import ConnectionKey
    from aiohttp.http import RawResponseMessage
    from aiohttp.streams import StreamReader

__all__ = [
    "AnswerLost",
    "OneAnswerConnector",
    "OneAnswerProtocol",
    "UnsendableHeader",
    "UnsendableUrl",
    "client_headers",
    "header_url",
    "no_retry",
    "request_url",
]

# What a request line cannot carry as it is: anything but visible ASCII (a space, a control
# character, DEL, a non-ASCII character).
_NOT_SENDABLE = re.compile(r"[^!-~]")


class UnsendableUrl(ValueError):
    """A URL with a character that cannot go on a request line as it is; never sent."""


def request_url(url: str) -> URL:
    """``url`` as the HTTP client is to send it: its request target byte for byte as held.

    The crawler's URLs reach the fetch normalised (:mod:`beamcrawl.core.urls.urlnorm`:
    percent-encoded as WHATWG's URL standard has it, the host in ASCII), already in the form
    to send; marked ``encoded``, yarl takes them as they are rather than re-quoting them.
    What the request line then carries is the URL's path and query as written, which is
    what the WARC request record says was sent (``transforms/warc_io.py``). A URL's fragment
    is not sent.

    An empty query (a bare ``?``, which the normal form keeps as browsers do) is sent too.
    yarl has no empty query: it would drop the ``?``, and ``/b?`` would go out as ``/b``,
    another target (robots.txt's ``Disallow: /b$`` forbids the one and not the other). So
    the ``?`` is carried as the last character of the path given to the client, which writes
    the request line from the path and query as they are.

    Raises:
        UnsendableUrl: The URL holds a character no request line carries as it is (one a
            normalised URL never holds): the fetch fails with that reason and nothing is
            sent, rather than something the client chose to encode.
    """
    bad = _NOT_SENDABLE.search(url)
    if bad is not None:
        raise UnsendableUrl(
            f"the URL holds {bad.group()!r} at {bad.start()}, which a request line cannot carry as it is"
        )
    sent = URL(url, encoded=True)
    if not sent.raw_query_string and "?" in url.partition("#")[0]:
        sent = URL.build(scheme=sent.scheme, authority=sent.raw_authority, path=f"{sent.raw_path}?", encoded=True)
    return sent


class UnsendableHeader(ValueError):
    """A request header value whose bytes the client cannot write as they are; never sent."""


def client_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Request headers as the HTTP client is to be given them, for their bytes to go out as
    the crawler holds them.

    The crawler holds a header value as its bytes read as latin-1: that is how a response's
    headers are read (an ETag echoed in ``If-None-Match`` comes from one), and how the WARC
    request record writes them. aiohttp writes a value's text as UTF-8, so a value with a
    byte above 0x7f (obs-text, RFC 9110 §5.5) would go out encoded twice (the bytes C3 A9 as
    C3 83 C2 A9): another validator than the server's, and other bytes than the
    record's. Such a value is handed over as the text whose UTF-8 is its bytes. ASCII values,
    nearly all, pass as they are.

    Raises:
        UnsendableHeader: A value whose bytes are not UTF-8 (aiohttp cannot write them), or
            not bytes at all (a character above U+00FF). ``conditional`` keeps and sends no
            such ETag or Last-Modified, so a stored validator never raises this.
    """
    if all(value.isascii() for _, value in headers):
        return headers
    out = []
    for name, value in headers:
        if not value.isascii():
            try:
                value = value.encode("latin-1").decode("utf-8")
            except UnicodeError as exc:
                raise UnsendableHeader(f"the {name} header's bytes cannot be sent as they are: {exc}") from None
        out.append((name, value))
    return out


def header_url(value: str) -> str:
    """A URL-bearing response header's value (``Location``) as the text a URL parser is to
    read: its bytes as UTF-8 when they are UTF-8.

    The crawler holds a header value as its bytes read as latin-1 (as the client decodes
    them, and the WARC record writes them back). A Location is an ASCII URI-reference (RFC
    9110 §10.2.2), but servers send a page's non-ASCII name as its UTF-8 bytes, which
    browsers follow, and warcio reads, as UTF-8. Read as latin-1, ``/caf`` C3 A9 was
    normalised to ``/caf%C3%83%C2%A9``: a URL the server never named was queued, checked
    against robots.txt and requested. Bytes that are no UTF-8 are read as before (latin-1),
    and text that is no bytes (not from the wire) is left as it is.
    """
    if value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return value


class AnswerLost(aiohttp.ClientConnectionError):
    """The connection was closed or reset before the whole head of the answer came.

    The message starts with the client's own error (``ServerDisconnectedError: ...``,
    ``ClientOSError: [Errno 104] Connection reset by peer``), so a fetch error's reason says
    what happened on the wire.
    """


async def no_retry(req: ClientRequest, handler: ClientHandlerType) -> ClientResponse:
    """A client middleware: a connection lost before the answer is the caller's to handle.

    aiohttp retries an idempotent request once when sending it or reading the answer's
    head fails with :class:`aiohttp.ClientOSError` or
    :class:`aiohttp.ServerDisconnectedError`; it lets every other :class:`aiohttp.ClientError`
    through untouched. Raising :class:`AnswerLost` instead keeps the request at one.
    Connection failures (no request sent) pass as they are.
    """
    try:
        return await handler(req)
    except aiohttp.ClientConnectorError:
        raise
    except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as exc:
        raise AnswerLost(f"{type(exc).__name__}: {exc}") from exc


class OneAnswerProtocol(ResponseHandler):
    """aiohttp's response reader, closing its connection when bytes come unasked.

    ``answering`` is True from the moment a request is about to be written on the connection
    until the connection goes back to the pool (:meth:`OneAnswerConnector._release`). A byte
    received outside that span answers no request: it is counted in ``stray_bytes``, not
    parsed, and the connection is closed, which the pool then drops instead of reusing.

    An HTTP/1.0 answer with a Transfer-Encoding header closes the connection once it is
    read, whatever its Connection header says: its sender may not have framed it as it
    says (Transfer-Encoding came with HTTP/1.1, and a 1.0 hop forwards chunks it does not
    know), and "might have retained a portion of the message ... that could be
    misinterpreted by further use of the connection", so a client MUST close it (RFC 9112
    §6.1).
    """

    def __init__(self, loop: Any) -> None:
        super().__init__(loop)
        self.answering = False
        self.stray_bytes = 0

    def set_response_params(self, **kwargs: Any) -> None:
        # Called by the client just before it writes a request on this connection.
        self.answering = True
        super().set_response_params(**kwargs)

    def feed_data(self, data: tuple[RawResponseMessage, StreamReader], size: int = 0) -> None:
        # Called with each response's head as it is parsed, before it is handed out.
        message = data[0]
        if message.version < HttpVersion11 and "Transfer-Encoding" in message.headers:
            self.force_close()
        super().feed_data(data, size)

    def data_received(self, data: bytes) -> None:
        if data and not self.answering:
            self.stray_bytes += len(data)
            self.close()
            return
        super().data_received(data)


class OneAnswerConnector(aiohttp.TCPConnector):
    """A TCPConnector whose connections read answers only while a request awaits one.

    Args:
        **kwargs: Passed to :class:`aiohttp.TCPConnector`.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(getattr(self, "_factory", None), functools.partial):
            raise TypeError(
                "this aiohttp makes its connections' protocol differently; beamcrawl.core.net.wire "
                "must be adapted to it (pin aiohttp to the version in requirements.txt)"
            )
        self._factory = functools.partial(OneAnswerProtocol, loop=self._loop)  # type: ignore[assignment]

    def _release(self, key: ConnectionKey, protocol: ResponseHandler, *, should_close: bool = False) -> None:
        if isinstance(protocol, OneAnswerProtocol):
            protocol.answering = False  # from now on, whatever arrives answers nothing
        super()._release(key, protocol, should_close=should_close)
