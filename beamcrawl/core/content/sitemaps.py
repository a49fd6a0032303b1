"""Sitemaps and feeds: URLs (with their modification dates) that sites announce themselves.

One entry point, :func:`parse`, reads any of the documents a site uses to list its pages and
says which kind it was:

* sitemaps (sitemaps.org 0.9): ``<urlset>`` with ``loc``, ``lastmod``, ``changefreq``,
  ``priority`` (and a news sitemap's ``publication_date`` when ``lastmod`` is missing);
  ``<sitemapindex>`` listing child sitemaps; plain-text sitemaps (one URL per line);
* feeds: RSS 2.0 (``item/link`` or a permalink ``guid``, ``pubDate``), RSS 1.0 / RDF, and
  Atom (``entry/link[@rel=alternate]``, ``updated`` else ``published``, ``xml:base``).

Safety and bounds, each with its reason:

* XML is parsed with defusedxml over the standard library's expat: any entity declaration
  is refused (billion laughs, quadratic blow-up) and no external entity or DTD is ever
  resolved (no local-file or network reads). Sitemaps and feeds never need either.
* Parsing streams (``iterparse``) and drops each ``<url>``/``<item>`` once read, so memory
  holds the entries, not the tree: a 50 MB sitemap is as safe as a small one.
* Gzip is detected by its magic bytes, not by name or Content-Type (servers label ``.xml.gz``
  every which way), and decompressed as a stream; at most two layers (a ``.gz`` file sent
  with ``Content-Encoding: gzip`` and not decoded by a client).
* The protocol's limits are enforced on the uncompressed document: at most 50,000 URLs and
  50 MB (52,428,800 bytes). A document over a limit is read up to it and marked
  ``truncated`` (the URLs before the cut are good; a decompression bomb stops there too).
* A sitemap may only list URLs under its own directory on its own scheme and host, unless a
  robots.txt named it, which vouches for that robots.txt's whole origin (sitemaps.org,
  "Sitemap file location" and cross-submits). Out-of-scope entries are skipped and counted:
  otherwise anyone able to put a file on a host could aim the crawl at other sites.

And the arithmetic of trusting ``lastmod``: per host, how often a sitemap's ``lastmod``
agreed with what our visits saw (:class:`LastmodTrust`), and how that trust turns a URL's
``lastmod`` into a change probability and a priority (:func:`sitemap_priority`).

Pure functions (bytes in, values out): no I/O, no Beam.
"""

from __future__ import annotations

import calendar
import email.utils
import functools
import io
import math
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from beamcrawl.core.net.transfer import CappedDecoder
from beamcrawl.core.urls.urlnorm import MAX_URL_LENGTH, InvalidURL, normalize

__all__ = [
    "CHANGEFREQ_SECONDS",
    "MAX_BYTES",
    "MAX_URLS",
    "Document",
    "Entry",
    "LastmodTrust",
    "changefreq_prior",
    "in_scope",
    "origin",
    "lastmod_change_probability",
    "lastmod_claim",
    "observe_lastmod",
    "parse",
    "parse_feed_date",
    "parse_w3c_datetime",
    "sitemap_priority",
    "sniff",
]

MAX_URLS = 50_000
MAX_BYTES = 50 * 1024 * 1024
MAX_GZIP_LAYERS = 2
_READ_CHUNK = 64 * 1024
# A text sitemap's longest line read: four bytes a character of the longest input the URL
# normaliser takes (it refuses anything longer before reading it).
_MAX_LINE_BYTES = 4 * 8 * MAX_URL_LENGTH
# The largest chunk fed to the XML parser at once. Expat (2.5, no reparse deferral) scans an
# unfinished token (a comment, a tag) again from its start at every feed, so one 50 MiB
# comment fed 64 KiB at a time was ~800 rescans of up to 50 MiB (30-40 s of CPU from a 50 KB
# download). Chunks double, up to this size, only while one token stays unfinished
# (character data and CDATA are reported as they are read, and keep the small chunk).
_FEED_MAX = 16 * 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
# Compressed bytes decoded at a time. Deflate expands a byte to at most ~1,032, so a chunk
# decodes to at most ~1 MiB held at once (8 KiB chunks held 8 MiB, a layer).
_GZIP_CHUNK = 1024
_XML_BASE = "{http://www.w3.org/XML/1998/namespace}base"

# changefreq hints as typical seconds between changes ("always": as fast as we model,
# "never": archived, as slow as we model).
CHANGEFREQ_SECONDS: dict[str, float] = {
    "always": 60.0,
    "hourly": 3600.0,
    "daily": 86400.0,
    "weekly": 7 * 86400.0,
    "monthly": 30 * 86400.0,
    "yearly": 365 * 86400.0,
    "never": 3650 * 86400.0,
}

Kind = Literal["urlset", "sitemapindex", "rss", "atom", "text", "unknown"]


@dataclass(frozen=True)
class Entry:
    """One URL a sitemap or feed lists.

    Attributes:
        url: The normalised absolute URL.
        lastmod: Its stated modification (or publication) time, epoch seconds, or None.
        lastmod_span: Seconds the stated time may stand for: 86,400 for a bare date (any
            time that day), 0 for a time to the second. Trust arithmetic needs it.
        changefreq: The sitemap's changefreq hint (lower case), or None.
        priority: The sitemap's priority hint in [0, 1], or None.
    """

    url: str
    lastmod: float | None = None
    lastmod_span: float = 0.0
    changefreq: str | None = None
    priority: float | None = None


@dataclass
class Document:
    """What one sitemap or feed said.

    Attributes:
        kind: urlset, sitemapindex, rss (2.0 or 1.0), atom, text, or unknown (not one of them).
        urls: Page entries (urlset, feed items, text lines), in document order, deduplicated.
        sitemaps: Child sitemaps of a sitemapindex.
        truncated: ``"urls"`` (over 50,000 entries) or ``"bytes"`` (over 50 MB uncompressed):
            the entries before the cut are kept. None when read whole.
        skipped: Entries dropped: not a crawlable URL, or out of the sitemap's scope.
        error: Why parsing stopped early (malformed XML, a forbidden entity), else None.
    """

    kind: Kind
    urls: list[Entry] = field(default_factory=list)
    sitemaps: list[Entry] = field(default_factory=list)
    truncated: str | None = None
    skipped: int = 0
    error: str | None = None


# --- dates -------------------------------------------------------------------------------

_W3C = re.compile(
    r"(\d{4})(?:-(\d{2})(?:-(\d{2})"
    r"(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"\s*(Z|z|[+-]\d{2}(?::?\d{2})?)?)?)?)?"
)


@functools.lru_cache(maxsize=4096)  # a sitemap repeats a few dates thousands of times
def parse_w3c_datetime(text: str | None) -> tuple[float, float] | None:
    """``(epoch seconds, span)`` of a W3C Datetime (the sitemap ``lastmod`` format), or None.

    Accepts ``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD`` and ``YYYY-MM-DDThh:mm[:ss[.s]]TZD``; a
    time without a zone is taken as UTC (common, and off by hours at most). ``span`` is the
    precision: a year, a month, a day, a minute or a second.
    """
    if text is None:
        return None
    m = _W3C.fullmatch(text.strip())
    if m is None:
        return None
    year, month, day, hh, mm, ss, _fraction, tz = m.groups()
    try:
        y, mo, d = int(year), int(month or 1), int(day or 1)
        h, mi, s = int(hh or 0), int(mm or 0), int(ss or 0)
        if not (1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1] and h <= 23 and mi <= 59 and s <= 60):
            return None
        epoch = float(calendar.timegm((y, mo, d, h, mi, min(s, 59), 0, 0, 0)))
    except (ValueError, OverflowError):
        return None
    if tz and tz not in ("Z", "z"):
        sign = 1 if tz[0] == "+" else -1
        digits = tz[1:].replace(":", "")
        zh, zm = int(digits[:2]), int(digits[2:4] or 0)
        if zh > 23 or zm > 59:  # TZD is hh:mm: +99:99 or +24:00 is no zone (it moved the time by days)
            return None
        epoch -= sign * (zh * 3600 + zm * 60)
    if month is None:
        span = float(366 * 86400 if calendar.isleap(y) else 365 * 86400)
    elif day is None:
        span = float(calendar.monthrange(y, mo)[1] * 86400)
    elif hh is None:
        span = 86400.0
    elif ss is None:
        span = 60.0
    else:
        span = 0.0
    return epoch, span


# RFC 5322 §4.3: a year written with two digits is 2000-2049 for 00-49 and 1950-1999 for
# 50-99, one written with three digits is 1900 more (email.utils reads 50-68 as 2050-2068
# and three digits as written, so "01 Jan 67" was 2067 and "01 Jan 103" the year 103).
_RFC5322_SHORT_YEAR = re.compile(r"^((?:[A-Za-z]+\s*,?\s*)?\d{1,2}[\s-]+[A-Za-z]+\.?[\s-]+)(\d{2,3})(?=\s|$)", re.ASCII)
# §3.3: a second of 60 is a leap second (read as :59, as in W3C dates); a zone's last two
# digits are minutes (+0060 is no zone, not +01:00).
_RFC5322_LEAP_SECOND = re.compile(r"(?<=\d:\d\d):60(?=\s|$)", re.ASCII)
_RFC5322_BAD_ZONE = re.compile(r"[+-]\d\d[6-9]\d(?=\s|\(|$)", re.ASCII)


def _full_year(m: re.Match[str]) -> str:
    yy = int(m[2])
    return m[1] + str(yy + (2000 if len(m[2]) == 2 and yy < 50 else 1900))


def parse_feed_date(text: str | None) -> tuple[float, float] | None:
    """``(epoch seconds, span)`` of a feed date: RFC 822 as RFC 5322 reads it (RSS
    ``pubDate``) or W3C (Atom, ``dc:date``, and the many RSS feeds that use ISO dates
    anyway)."""
    if text is None:
        return None
    value = text.strip()
    if not value:
        return None
    w3c = parse_w3c_datetime(value)
    if w3c is not None:
        return w3c
    if _RFC5322_BAD_ZONE.search(value):
        return None
    value = _RFC5322_LEAP_SECOND.sub(":59", _RFC5322_SHORT_YEAR.sub(_full_year, value, count=1))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        return float(calendar.timegm(when.timetuple())), 0.0
    try:
        return when.timestamp(), 0.0
    except (OverflowError, OSError, ValueError):
        return None


# --- scope -------------------------------------------------------------------------------


def origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL: the unit a sitemap's (or robots.txt's) scope names."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def in_scope(url: str, sitemap_url: str, robots_origins: tuple[str, ...] | frozenset[str] = ()) -> bool:
    """Whether a sitemap at ``sitemap_url`` may list ``url`` (both normalised).

    A sitemap speaks for URLs under its own directory on its own scheme and host; a robots.txt
    that names it extends that to the robots.txt's whole origin (``scheme://host[:port]``).
    """
    return _Scope(sitemap_url, robots_origins)(url)


# --- reading bytes safely ----------------------------------------------------------------


class _Reader(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Capped(io.RawIOBase):
    """A reader that yields at most ``limit`` bytes of ``inner`` and notes whether more came."""

    def __init__(self, inner: _Reader, limit: int) -> None:
        super().__init__()
        self.inner = inner
        self.left = limit
        self.over = False

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            if not self.over and self.inner.read(1):
                self.over = True
            return b""
        want = self.left if size is None or size < 0 else min(size, self.left)
        data = self.inner.read(want)
        self.left -= len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _Peekable(io.RawIOBase):
    """A reader whose first bytes can be looked at without being consumed."""

    def __init__(self, inner: _Reader) -> None:
        super().__init__()
        self.inner = inner
        self.head = b""

    def readable(self) -> bool:
        return True

    def peek(self, n: int) -> bytes:
        while len(self.head) < n:
            more = self.inner.read(n - len(self.head))
            if not more:
                break
            self.head += more
        return self.head[:n]

    def read(self, size: int = -1) -> bytes:
        if self.head:
            if size is None or size < 0:
                data, self.head = self.head + self.inner.read(), b""
                return data
            data, self.head = self.head[:size], self.head[size:]
            return data
        return self.inner.read(size)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _SafeGzip(io.RawIOBase):
    """One gzip layer, undone as it is read by the fetcher's capped decoder (at most ``limit``
    bytes out, core/net/transfer.py); a corrupt or cut-off stream ends early with a note
    (the caller keeps what was read), never as an exception mid-parse."""

    def __init__(self, inner: _Reader, limit: int) -> None:
        super().__init__()
        self.inner = inner
        self.decoder = CappedDecoder("gzip", limit)
        self.pending = b""
        self.offset = 0  # of the next byte of ``pending`` to hand out
        self.ended = False
        self.problem: str | None = None

    def readable(self) -> bool:
        return True

    def _more(self) -> None:
        """Decodes the next raw chunk (a chunk expands to at most ~1,000 times its size)."""
        raw = self.inner.read(_GZIP_CHUNK)
        self.pending = self.decoder.feed(raw) if raw else self.decoder.finish()
        self.offset = 0
        if raw and not self.decoder.done:
            return
        self.ended = True
        if self.decoder.error is not None:
            self.problem = f"bad gzip data: {self.decoder.error}"
        elif not raw and not self.decoder.complete:
            self.problem = "bad gzip data: the compressed stream ended before its end marker"

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(io.DEFAULT_BUFFER_SIZE * 16), b""))
        # Filled to ``size`` (the parser asks for more only while one token is unfinished),
        # and handed out from an offset: slicing off the rest each read copied it each time.
        parts: list[bytes] = []
        while size > 0:
            if self.offset >= len(self.pending):
                if self.ended:
                    break
                self._more()
                continue
            data = self.pending[self.offset : self.offset + size]
            self.offset += len(data)
            size -= len(data)
            parts.append(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _open(data: bytes | _Reader, limit: int = MAX_BYTES) -> tuple[_Peekable, list[_SafeGzip]]:
    """The uncompressed stream of ``data`` (gzip layers removed, by magic bytes), each layer
    at most one byte past ``limit`` (the byte that shows the limit was passed)."""
    raw: _Reader = io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
    stream = _Peekable(raw)
    layers: list[_SafeGzip] = []
    while len(layers) < MAX_GZIP_LAYERS and stream.peek(2) == _GZIP_MAGIC:
        layer = _SafeGzip(stream, limit + 1)
        layers.append(layer)
        stream = _Peekable(layer)
    return stream, layers


# --- parsing -----------------------------------------------------------------------------

# The element that holds one entry, per document kind.
_RECORD: dict[str, str] = {"urlset": "url", "sitemapindex": "sitemap", "rss": "item", "atom": "entry"}
# Text of a field longer than this is not a URL or a date (URLs stop at 2,048 characters):
# it is dropped, so one hostile element cannot hold megabytes in memory.
_MAX_FIELD_CHARS = 8192


# Elements open at once. The parser keeps each open element (~130 bytes in expat and the
# tree builder's callbacks), so 50 MB of nested <a> held over 2 GB, from a 50 KB gzip.
# Sitemaps nest 4 deep and a feed's XHTML content little more.
_MAX_DEPTH = 1000
# Distinct names (elements, attributes, namespace prefixes). The parser keeps every one it
# meets for the rest of the document (expat's element, attribute and prefix tables, the tree
# builder's name cache): 10 MB of <n1/><n2/>... held 180 MB. A sitemap or feed uses dozens.
_MAX_NAMES = 10_000


class _Stop(Exception):
    """Raised inside the parser's callbacks to end parsing early (a limit, an unknown root)."""


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1] if tag.startswith("{") else tag


def _root_kind(name: str) -> Kind:
    kinds: dict[str, Kind] = {
        "urlset": "urlset",
        "sitemapindex": "sitemapindex",
        "rss": "rss",
        "RDF": "rss",
        "feed": "atom",
    }
    return kinds.get(name, "unknown")


class _Scope:
    """:func:`in_scope` with its prefixes computed once (it runs per entry)."""

    def __init__(self, sitemap_url: str, robots_origins: tuple[str, ...] | frozenset[str]) -> None:
        path = urlsplit(sitemap_url).path or "/"
        self.prefixes = (origin(sitemap_url) + path[: path.rfind("/") + 1],) + tuple(
            o.rstrip("/") + "/" for o in robots_origins
        )

    def __call__(self, url: str) -> bool:
        # Normalised URLs always have a path, so "origin/" cannot match a longer host name.
        return url.startswith(self.prefixes)


class _Collector:
    """Gathers entries with the limits, scope and deduplication applied."""

    def __init__(self, doc: Document, base: str, scope: _Scope | None, max_urls: int) -> None:
        self.doc = doc
        self.base = base
        self.scope = scope
        self.max_urls = max_urls
        self.seen: set[str] = set()
        self.count = 0

    def add(self, target: list[Entry], raw: str | None, base: str | None = None, **hints: object) -> None:
        """Adds one entry; raises :class:`_Stop` past the URL limit."""
        if self.count >= self.max_urls:
            self.doc.truncated = "urls"
            raise _Stop
        if not raw:
            self.doc.skipped += 1
            return
        try:
            url = normalize(raw, base or self.base)
        except (InvalidURL, ValueError):
            self.doc.skipped += 1
            return
        if self.scope is not None and not self.scope(url):
            self.doc.skipped += 1
            return
        self.count += 1
        if url not in self.seen:
            self.seen.add(url)
            target.append(Entry(url, **hints))  # type: ignore[arg-type]


def _lastmod_hints(value: tuple[float, float] | None) -> dict[str, Any]:
    if value is None:
        return {}
    return {"lastmod": value[0], "lastmod_span": value[1]}


def _sitemap_hints(fields: dict[str, str]) -> dict[str, Any]:
    # Google News sitemaps date their entries with <news:news><news:publication_date>.
    hints = _lastmod_hints(parse_w3c_datetime(fields.get("lastmod") or fields.get("publication_date")))
    freq = (fields.get("changefreq") or "").strip().lower()
    if freq in CHANGEFREQ_SECONDS:
        hints["changefreq"] = freq
    prio = fields.get("priority")
    if prio is not None:
        try:
            value = float(prio)
        except ValueError:
            value = math.nan
        if 0.0 <= value <= 1.0:
            hints["priority"] = value
    return hints


_FEED_DATES = {"atom": ("updated", "published", "modified", "issued"), "rss": ("pubDate", "date", "updated")}


def _xml_base(value: str, parent: str) -> str:
    """An element's ``xml:base`` resolved against its parent's base as every link is resolved
    (:func:`~beamcrawl.core.urls.urlnorm.normalize`, as an HTML ``<base href>`` is).

    urljoin read it otherwise: it took ``http:///a.example/`` for a path on the parent's host
    and kept backslashes as path characters, so an entry's link went to the feed's host
    where the base names another. A value that names no URL the crawler reads is kept as
    written: references under it resolve to none (absolute links still do).
    """
    try:
        return normalize(value.strip(), parent)
    except InvalidURL:
        return value.strip()


class _Target:
    """Callbacks for the XML parser: no tree is built, only the fields of the entry being
    read are held, so memory does not depend on the document's size or shape."""

    def __init__(self, doc: Document, collect: _Collector) -> None:
        self.doc = doc
        self.collect = collect
        self.depth = 0
        self.bases: list[str] = [collect.base]
        self.record: str | None = None
        self.record_depth = 0
        self.fields: dict[str, str] = {}
        # The href of an entry's first link element of rel "alternate" (the default) that
        # names something: the only one read. Keeping each link element an entry holds kept
        # ~120 bytes for every 15 of <link href=''/>: one item of them in 50 MB (a 97 KB
        # gzip) held 340 MB.
        self.alternate: str | None = None
        self.permalink = True
        self.about: str | None = None
        self.capture: str | None = None
        self.parts: list[str] = []
        self.size = 0
        self.events = 0  # callbacks so far: none during a feed means one token is still open
        self.names: set[str] = set()

    def _name(self, name: str) -> None:
        if name not in self.names:
            if len(self.names) >= _MAX_NAMES:
                self.doc.error = f"more than {_MAX_NAMES} distinct element, attribute or prefix names"
                raise _Stop
            self.names.add(name)

    def start_ns(self, prefix: str, uri: str) -> None:
        self._name(f"xmlns:{prefix}")

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        self.events += 1
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            self.doc.error = f"elements nested more than {_MAX_DEPTH} deep"
            raise _Stop
        self._name(tag)
        for key in attrs:
            self._name(key)
        base = attrs.get(_XML_BASE)
        self.bases.append(_xml_base(base, self.bases[-1]) if base else self.bases[-1])
        name = _local(tag)
        if self.depth == 1:
            self.doc.kind = _root_kind(name)
            if self.doc.kind == "unknown":
                raise _Stop
            self.record = _RECORD[self.doc.kind]
            if self.doc.kind in ("rss", "atom"):
                self.collect.scope = None  # feeds link anywhere, as pages do
            return
        if self.record_depth == 0:
            if name == self.record:
                self.record_depth = self.depth
                self.fields, self.alternate, self.permalink = {}, None, True
                self.about = attrs.get("{http://www.w3.org/1999/02/22-rdf-syntax-ns#}about")
            return
        child = self.depth == self.record_depth + 1
        if child and name == "link" and "href" in attrs and self.alternate is None:
            if (attrs.get("rel") or "alternate").strip().lower() == "alternate":
                self.alternate = attrs["href"].strip() or None
        if child and name == "guid":
            self.permalink = (attrs.get("isPermaLink") or "true").strip().lower() != "false"
        # Fields are the entry's children (first non-empty of each name), plus a news sitemap's
        # publication_date, nested in <news:news>, which takes over the capture.
        if name == "publication_date" or (self.capture is None and child and name not in self.fields):
            self.capture, self.parts, self.size = name, [], 0

    def data(self, text: str) -> None:
        self.events += 1
        if self.capture is not None:
            self.size += len(text)
            if self.size <= _MAX_FIELD_CHARS:
                self.parts.append(text)

    def end(self, tag: str) -> None:
        self.events += 1
        depth = self.depth
        self.depth -= 1
        base = self.bases.pop()
        if self.capture is not None and _local(tag) == self.capture:
            text = "".join(self.parts).strip()
            # The first of each name that says something: an empty one (an RSS item's
            # <atom:link href/> is a "link" too) leaves the field to the next.
            if text and self.size <= _MAX_FIELD_CHARS:
                self.fields[self.capture] = text
            self.capture = None
        if depth != self.record_depth:
            return
        self.record_depth = 0
        kind, f = self.doc.kind, self.fields
        if kind == "urlset":
            self.collect.add(self.doc.urls, f.get("loc"), **_sitemap_hints(f))
        elif kind == "sitemapindex":
            self.collect.add(self.doc.sitemaps, f.get("loc"), **_lastmod_hints(parse_w3c_datetime(f.get("lastmod"))))
        else:
            date = next((d for d in map(parse_feed_date, (f.get(n) for n in _FEED_DATES[kind])) if d), None)
            self.collect.add(self.doc.urls, self._feed_link(), base=base, **_lastmod_hints(date))

    def _feed_link(self) -> str | None:
        """The page an RSS item or Atom entry points at."""
        alternate = self.alternate
        if self.doc.kind == "atom":
            if alternate:
                return alternate
            # No alternate link: an id that is itself a web address (tag: URIs are not).
            ident = self.fields.get("id") or ""
            return ident if ident.lower().startswith(("http://", "https://")) else None
        # RSS: <link> text, an <atom:link href>, a permalink <guid>, RSS 1.0's rdf:about.
        return (
            self.fields.get("link") or alternate or (self.fields.get("guid") if self.permalink else None) or self.about
        )

    def close(self) -> None:
        return None


def _xml_parser(target: object) -> SafeET.DefusedXMLParser:
    # No DTD is forbidden outright (old RSS 0.91 feeds carry a harmless DOCTYPE), but any
    # entity declaration is, and nothing external is ever resolved.
    return SafeET.DefusedXMLParser(target=target, forbid_dtd=False, forbid_entities=True, forbid_external=True)


def _parse_xml(stream: _Capped, doc: Document, collect: _Collector) -> None:
    """Feeds the document to the parser in chunks; stops at a limit or the first error."""
    target = _Target(doc, collect)
    parser = _xml_parser(target)
    size = _READ_CHUNK
    while True:
        chunk = stream.read(size)
        if not chunk:
            break
        events = target.events
        parser.feed(chunk)
        # No callback: the parser holds one unfinished token and will scan it again from its
        # start at the next feed, so feed more at once while that lasts (it holds the token
        # anyway; a document that streams keeps the small chunk).
        size = _READ_CHUNK if target.events != events else min(2 * size, _FEED_MAX)
    if not stream.over:
        parser.close()


class _CrAsLf(io.RawIOBase):
    """A text sitemap's bytes with each CR read as LF: a line ends at LF, CRLF (then an
    empty line, skipped) or a lone CR. Read by LF alone, a file with CR line ends was one
    line, its URLs joined into one (URL parsing drops the CRs) that no line named."""

    def __init__(self, inner: _Reader) -> None:
        super().__init__()
        self.inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.inner.read(len(buffer)).replace(b"\r", b"\n")
        buffer[: len(data)] = data
        return len(data)


def _parse_text(stream: _Capped, doc: Document, collect: _Collector) -> None:
    """A text sitemap: one absolute URL per line (LF, CRLF or CR), UTF-8.

    A line of more than :data:`_MAX_LINE_BYTES` is skipped unread, a piece at a time: no URL
    is that long (the normaliser refuses far shorter input), and read whole, one 50 MB line
    was held several times over (its bytes, their copy, the decoded text, its strip).
    """
    doc.kind = "text"
    reader = io.BufferedReader(_CrAsLf(stream), buffer_size=_READ_CHUNK)
    while raw := reader.readline(_MAX_LINE_BYTES + 1):
        if len(raw) > _MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := reader.readline(_READ_CHUNK)) and not rest.endswith(b"\n"):
                pass
            doc.skipped += 1
            continue
        try:
            line = raw.decode("utf-8").strip().lstrip("\ufeff")
        except UnicodeDecodeError:
            doc.skipped += 1
            continue
        if not line:
            continue
        if not line.lower().startswith(("http://", "https://")):
            doc.skipped += 1
            continue
        collect.add(doc.urls, line)


class _SniffTarget:
    def __init__(self) -> None:
        self.kind: Kind = "unknown"

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        self.kind = _root_kind(_local(tag))
        raise _Stop

    def data(self, text: str) -> None:
        pass

    def end(self, tag: str) -> None:
        pass

    def close(self) -> None:
        return None


def sniff(data: bytes) -> Kind:
    """The kind of document ``data`` is, from its first bytes (after any gzip layers).

    Reads only up to the root element: cheap enough for the parse stage to ask of every
    response whose URL came from robots.txt, a sitemap, a feed or a submit.
    """
    stream, _ = _open(data)
    head = stream.peek(4096)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith(b"<"):
        return "text" if text[:8].lower().startswith((b"http://", b"https://")) else "unknown"
    target = _SniffTarget()
    try:
        _xml_parser(target).feed(head)
    except _Stop:
        return target.kind
    except (SafeET.ParseError, DefusedXmlException, ValueError):
        pass
    return "unknown"


def parse(
    data: bytes | _Reader,
    url: str,
    *,
    robots_origins: tuple[str, ...] | frozenset[str] = (),
    max_urls: int = MAX_URLS,
    max_bytes: int = MAX_BYTES,
) -> Document:
    """Reads a sitemap, sitemap index, text sitemap or feed.

    Args:
        data: The document as fetched (gzipped or not), as bytes or a binary stream.
        url: The document's final URL (after redirects): the base of relative links and the
            scope of a sitemap.
        robots_origins: Origins (``scheme://host[:port]``) of robots.txt files that named
            this sitemap (or the index it came from); URLs there are in scope.
        max_urls: Entry limit (the protocol's 50,000).
        max_bytes: Uncompressed size limit (the protocol's 50 MB).

    Returns:
        The document's entries. Never raises for bad input: a malformed, hostile or
        oversized document yields what was read before the problem, with ``error`` or
        ``truncated`` set.
    """
    doc = Document(kind="unknown")
    try:
        base = normalize(url)
    except InvalidURL:
        base = url
    collect = _Collector(doc, base, _Scope(base, robots_origins), max_urls)
    stream, layers = _open(data, max_bytes)
    capped = _Capped(stream, max_bytes)
    head = stream.peek(512).lstrip(b"\xef\xbb\xbf \t\r\n")
    try:
        if head.startswith(b"<"):
            _parse_xml(capped, doc, collect)
        elif head:
            _parse_text(capped, doc, collect)
    except _Stop:
        pass
    except DefusedXmlException as exc:
        doc.error = f"forbidden XML construct: {type(exc).__name__}"
    except SafeET.ParseError as exc:
        doc.error = f"malformed XML: {exc}"
    except (ValueError, OSError, EOFError, zlib.error) as exc:
        doc.error = f"unreadable document: {exc}"
    if capped.over and doc.truncated is None:
        doc.truncated = "bytes"
    for layer in layers:
        if layer.problem and doc.error is None:
            doc.error = layer.problem
    return doc


# --- hints: changefreq, lastmod trust ----------------------------------------------------


def changefreq_prior(changefreq: str | None, trust: float, default_rate: float) -> float:
    """A prior median change rate (per second) for a URL first seen in a sitemap.

    The sitemap's changefreq and the default are blended geometrically by the host's lastmod
    trust (a site whose lastmod is honest probably means its changefreq too); a plain
    default when there is no hint.
    """
    seconds = CHANGEFREQ_SECONDS.get((changefreq or "").lower())
    if seconds is None or default_rate <= 0:
        return default_rate
    w = min(1.0, max(0.0, trust))
    return math.exp(w * math.log(1.0 / seconds) + (1.0 - w) * math.log(default_rate))


@dataclass(frozen=True)
class LastmodTrust:
    """A host's record of how often its sitemap ``lastmod`` matched what visits saw.

    ``score`` is the posterior mean of a Beta(1, 1) prior updated with the agreements and
    disagreements, so a host never checked scores 0.5 and one checked often scores its
    observed rate. Evidence is capped at :attr:`MAX_EVIDENCE` (both counts scaled down), so
    a site that starts lying (or stops) is noticed within a few hundred visits.
    """

    agree: float = 0.0
    disagree: float = 0.0

    PRIOR_AGREE = 1.0
    PRIOR_DISAGREE = 1.0
    MAX_EVIDENCE = 200.0

    @property
    def score(self) -> float:
        return (self.agree + self.PRIOR_AGREE) / (self.agree + self.disagree + self.PRIOR_AGREE + self.PRIOR_DISAGREE)

    def add(self, agreed: bool) -> "LastmodTrust":
        agree, disagree = self.agree + (1.0 if agreed else 0.0), self.disagree + (0.0 if agreed else 1.0)
        total = agree + disagree
        if total > self.MAX_EVIDENCE:
            agree, disagree = agree * self.MAX_EVIDENCE / total, disagree * self.MAX_EVIDENCE / total
        return LastmodTrust(agree, disagree)

    def merge(self, other: "LastmodTrust") -> "LastmodTrust":
        """Adds another batch of evidence (a round's observations for the host)."""
        agree, disagree = self.agree + other.agree, self.disagree + other.disagree
        total = agree + disagree
        if total > self.MAX_EVIDENCE:
            agree, disagree = agree * self.MAX_EVIDENCE / total, disagree * self.MAX_EVIDENCE / total
        return LastmodTrust(agree, disagree)


# A lastmod this far past the crawler's clock is not a modification time but a lie (or a
# template printing "now" in the wrong zone).
FUTURE_SLACK = 86400.0


def lastmod_claim(lastmod: float | None, span: float, since: float | None, now: float) -> bool | None:
    """What a ``lastmod`` claims about a page last checked at ``since``.

    Returns:
        True: changed since (the stated time is after ``since``); False: not changed since
        (the stated period ended by ``since``); None: no claim (no lastmod, no earlier
        check, a stated period that contains ``since``, or a time in the future).
    """
    if lastmod is None or since is None or lastmod > now + FUTURE_SLACK:
        return None
    if lastmod > since:
        return True
    if lastmod + span <= since:
        return False
    return None


def observe_lastmod(
    trust: LastmodTrust,
    *,
    lastmod: float | None,
    span: float,
    since: float | None,
    changed: bool | None,
    now: float,
) -> LastmodTrust:
    """Updates a host's trust after a visit to a URL its sitemap dated.

    Args:
        trust: The host's trust so far.
        lastmod: The sitemap's ``lastmod`` for the URL as read *before* this visit.
        span: Its precision (``Entry.lastmod_span``).
        since: When the visit before this one saw the content.
        changed: What this visit found (changed by checksum, or unchanged/304); None if it
            could not tell.
        now: This visit's time.
    """
    if lastmod is None or since is None or changed is None:
        return trust
    if lastmod > now + FUTURE_SLACK:
        return trust.add(False)  # a future date is wrong whatever the page did
    claim = lastmod_claim(lastmod, span, since, now)
    if claim is None:
        return trust
    return trust.add(claim == changed)


def lastmod_change_probability(p_model: float, claim: bool | None, trust: float) -> float:
    """The chance a page changed, given the change model's ``p_model`` and a lastmod claim.

    With probability ``trust`` the lastmod is right (changed: 1, not changed: 0), otherwise
    it says nothing and the model's probability stands.
    """
    t = min(1.0, max(0.0, trust))
    p = min(1.0, max(0.0, p_model))
    if claim is None:
        return p
    if claim:
        return t + (1.0 - t) * p
    return (1.0 - t) * p


def sitemap_priority(
    importance: float,
    p_model: float,
    claim: bool | None,
    trust: float,
    hint_priority: float | None = None,
    hint_weight: float = 0.5,
) -> float:
    """Priority of a URL a sitemap lists, on the crawl's one priority scale.

    ``importance × lastmod_change_probability(p_model, claim, trust)``, times a mild factor
    from the sitemap's own ``priority`` hint (``1 + hint_weight × (priority − 0.5)``, so 0.75
    to 1.25 by default): the protocol calls it relative within a site and many sites set
    every page to 1.0, so it may nudge, never dominate. For a URL never fetched pass
    ``p_model=1`` (its whole content is new) and ``claim=None``.
    """
    factor = 1.0
    if hint_priority is not None:
        factor = 1.0 + hint_weight * (min(1.0, max(0.0, hint_priority)) - 0.5)
    return max(0.0, importance) * factor * lastmod_change_probability(p_model, claim, trust)
