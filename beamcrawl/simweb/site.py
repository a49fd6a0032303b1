"""The synthetic web: hosts, pages, links and what the server answers for each request.

:class:`SimWeb` is a pure, synchronous model. The aiohttp server (``server.py``) asks it for a
:class:`SimResponse` per request and the truth writer (``truth.py``) asks it for the same facts as
JSON, so the served web and its ground truth cannot drift apart.

Everything is a function of ``(seed, host index, path)`` and computed on demand: host records are
built on first use and page bodies live in a bounded LRU cache, so a 5,000-host web with 100,000
pages per host starts instantly and stays small.

URL space of one host with ``K`` pages (page ``j`` is one of ``0 <= j < K``):

==========================  ==================================================================
``/``                       page 0, links to pages 1..12 so a crawl from the root reaches the site
``/p/J.html``               ordinary pages (also exact and near duplicates of page ``J-1``)
``/docs/SEC/J.html``        documentation pages (``SEC`` in guide, api, howto, ref)
``/docs/SEC/draft-J.html``  drafts (disallowed by ``/docs/*/draft`` on wildcard hosts)
``/docs/public/J.html``     allowed by ``Allow: /docs/public/`` on allow_override hosts
``/private/J.html``         disallowed on most hosts
``/files/J.pdf``            PDF stand-ins (disallowed by ``/*.pdf$`` on wildcard hosts)
``/r/N``                    301 to page ``N``'s path (absolute Location for even ``N``)
``/err/N.html``             500
``/news.html``              changing page (changing hosts only): content counts its servings
``/cal/YYYY/MM.html``       calendar trap (trap hosts only): links to the next and previous month
``/sitemap.xml``            sitemap of the first pages (hosts whose robots.txt names it; not
                            with the change model)
anything else               404; any query string is ignored (``?print=1`` copies are exact dups)
==========================  ==================================================================

The change model (opt-in: ``change_scale > 0``; off, the web is byte for byte what it was
without it). Ordinary HTML pages change at known rates (``changes.py`` has the classes, the
seeded Poisson process and the epoch) and are served at the version current at the request's
time: version ``v >= 1`` adds an "Updated" paragraph (its text drawn from the page's change key
and ``v``) before the footer, links unchanged; ``ETag`` is derived from the bytes and ``v``,
``Last-Modified`` is the last change (rounded down to the second). Copies change with their
original: a page's *change key* is ``(site, source)``, the original host for mirror and
near-copy hosts and the page a ``dup``/``near`` page copies, so a mirror serves its original's
bytes at every moment and an exact duplicate stays one. PDFs do not change. The model adds:

==============================  ==============================================================
``/sitemap_index.xml``          sitemap index (sitemap hosts, below) of the next two
``/sitemaps/pages-1.xml.gz``    gzipped sitemap: first half of the listed pages, even ``/s/``
``/sitemaps/pages-2.xml``       plain sitemap: second half of the listed pages, odd ``/s/``
``/s/K.html``                   sitemap-only pages (sitemap hosts, 5-10 each): linked from no
                                page, listed only in the host's sitemaps; changing pages
``/feed.rss``, ``/feed.atom``   feeds (feed sites, below): the 20 most recently changed listed
                                pages, newest first, dated by their last change
==============================  ==============================================================

*Sitemap hosts*: every ``private_sitemap`` host and every other host with a robots.txt text
(not 404/403/503) whose index has the web's sitemap parity (about half of those: 45% of hosts);
their robots.txt names ``/sitemap_index.xml`` (instead of ``/sitemap.xml``). The sitemaps list
the host's change-model pages among its first :data:`SITEMAP_LIST_PAGES` pages (root, ``/p/``,
``/docs/``, ``/private/``... every page but PDFs, whether robots.txt allows it or not) and its
sitemap-only pages, each with ``<lastmod>`` = its last change at serving time. On *lying*
sitemap hosts, those with ``(index // 2 + offset) % 4 == 0`` (about one in four), every
``lastmod`` is the serving time instead. *Feed sites*: a site (a host, or a copy's original)
with ``(site + offset) % 6`` of 0 serves ``/feed.rss``, of 1 ``/feed.atom``, of 2 both (half of
all sites); the feeds are announced by ``<link rel="alternate">`` in the root page's head and,
where robots.txt has a text, by ``Sitemap:`` lines. Offsets come from the seed.

Copies and look-alikes across hosts. From host index ``copy_hosts_from`` on (40 by default, so
every web of up to 40 hosts is exactly what it was before these kinds existed), hosts take a
role by their position in a cycle of :data:`COPY_CYCLE`:

* **mirror** hosts serve their original host's pages byte for byte, under the same paths
  (relative links then lead around the mirror, absolute ones back to the original);
* **near-copy** hosts serve their original's pages with their own timestamp, reader counter
  and ad slot (the original's news template shows other values; a plain page gets them added);
* **template** hosts write every page in one news template (heavy chrome, a dateline, a
  newsletter box, a disclaimer) around a different article: look-alikes, not copies.

A copy's original is the nearest earlier ordinary (or template) host with the same page layout,
so the copy serves the original's URL space under its own name, and no other host's pages, nor
any link into the copy, change: every ordinary host is what it was without copy hosts. A copy
keeps its own robots.txt and latency and serves its original's trap and changing page; a host
with no earlier host of its layout stays ordinary.
"""

from __future__ import annotations

import functools
import random
import re
import time
import zlib
from dataclasses import dataclass, replace
from typing import NamedTuple
from urllib.parse import urljoin, urlsplit, urlunsplit

from beamcrawl.simweb import feeds
from beamcrawl.simweb.changes import SeededChanges, PageKey, http_date, parse_mix
from beamcrawl.simweb.content import render_page, render_paragraphs, render_pdf, words
from beamcrawl.simweb.names import host_names
from beamcrawl.simweb.robots_variants import (
    ROBOTS_CYCLE,
    ROBOTS_REDIRECT_TARGET,
    ROBOTS_TEXT_KINDS,
    RobotsSpec,
    robots_spec,
)

__all__ = ["COPY_CYCLE", "COPY_HOSTS_FROM", "HostInfo", "Anchor", "PageModel", "SimResponse", "SimWeb"]

HTML = "text/html; charset=utf-8"
# Pages take their kind from this cycle, rotated per host. Every non-"p" kind sits between two
# "p" pages, so the chain links (page j links to j+1 and j+2) always step over one blocked page,
# and every duplicate ("dup", "near") follows the ordinary page it copies.
PAGE_CYCLE: tuple[str, ...] = (
    "p",
    "docs",
    "p",
    "private",
    "p",
    "draft",
    "p",
    "dup",
    "p",
    "public",
    "p",
    "pdf",
    "p",
    "near",
    "p",
    "docs",
    "p",
    "private",
    "p",
    "p",
)
SECTIONS: tuple[str, ...] = ("guide", "api", "howto", "ref")
ROOT_LINKS = 12  # the root page links to pages 1..ROOT_LINKS
EXTERNAL_TARGET_PAGES = 40  # cross-host links point at one of the target's first pages
SITEMAP_PAGES = 50
TRAP_ENTRY = "/cal/2024/01.html"
# Host roles for copies and look-alikes, by ``(index - copy_hosts_from) % COPY_CYCLE``: the
# role and, for a copy, whether its original should preferably be a template host.
COPY_CYCLE = 10
COPY_HOSTS_FROM = 40
HOST_ROLES: dict[int, tuple[str, bool]] = {
    1: ("mirror", False),
    3: ("near", False),  # of an ordinary host: ad slot, counter and footer timestamp added
    5: ("template", False),
    6: ("near", True),  # of a template host: another timestamp, counter and ad
    8: ("template", False),
    9: ("mirror", True),
}
TEMPLATE = "news"
# Fixed validators so conditional requests (If-None-Match / If-Modified-Since) can get a 304.
LAST_MODIFIED = "Mon, 01 Jan 2024 00:00:00 GMT"

# The change model's published resources (see the module docstring).
SITEMAP_INDEX = "/sitemap_index.xml"
SITEMAP_FILES: tuple[str, ...] = ("/sitemaps/pages-1.xml.gz", "/sitemaps/pages-2.xml")
FEED_PATHS: dict[str, str] = {"rss": "/feed.rss", "atom": "/feed.atom"}
FEED_TYPES: dict[str, str] = {"rss": "application/rss+xml", "atom": "application/atom+xml"}
SITEMAP_LIST_PAGES = 1000  # sitemaps list the change-model pages among a host's first 1000
FEED_ITEMS = 20  # a feed lists this many most recently changed pages
SITEMAP_ONLY_PAGES = (5, 10)  # sitemap-only pages per sitemap host, inclusive range
LASTMOD_LIE_CYCLE = 4  # one sitemap host in this many states lastmod = serving time
FEED_CYCLE = 6  # sites by (site + offset) % FEED_CYCLE: 0 rss, 1 atom, 2 both, else none
_FEED_KINDS: dict[int, tuple[str, ...]] = {0: ("rss",), 1: ("atom",), 2: ("rss", "atom")}
GZIP_TYPE = "application/gzip"
XML_TYPE = "application/xml"

_PAGE_RE = re.compile(r"^/(?:p|private|docs/[a-z]+|files)/(?:draft-)?(0|[1-9][0-9]*)\.(?:html|pdf)$")
_REDIRECT_RE = re.compile(r"^/r/(0|[1-9][0-9]*)$")
_ERROR_RE = re.compile(r"^/err/(0|[1-9][0-9]*)\.html$")
_CAL_RE = re.compile(r"^/cal/([0-9]{4})/([0-9]{2})\.html$")
_SONLY_RE = re.compile(r"^/s/(0|[1-9][0-9]*)\.html$")


class Anchor(NamedTuple):
    """One ``<a>`` element of a page (a NamedTuple: pages are built on the hot path).

    Attributes:
        href: The attribute value as written in the HTML (relative, absolute, with fragment...).
        url: The absolute target with a lower-case host, the port and no fragment: what a
            correct parser gets from ``href`` and the page's base URL.
        nofollow: Whether the anchor carries ``rel=nofollow``.
        style: Markup variant (quotes, case) used by the renderer.
    """

    href: str
    url: str
    nofollow: bool = False
    style: int = 0


@dataclass(frozen=True)
class PageModel:
    """The structure of one page, everything but its text.

    Attributes:
        host_index: Index of the host in :attr:`SimWeb.names`.
        index: Page number ``j``.
        path: The page's path.
        kind: Entry of :data:`PAGE_CYCLE`, or ``root``.
        links: The page's anchors, in generation order.
        base_href: Value of the ``<base href>`` element, if any.
        canonical: ``<link rel="canonical">`` target, if any.
        meta_robots: Content of ``<meta name="robots">``, if any.
        header_nofollow: Whether the response carries ``X-Robots-Tag: nofollow``.
        text_key: Seed of the text stream (shared by exact and near duplicates).
        near: Whether the text is altered by one word (near duplicate).
        duplicate_of: Path (same host) or absolute URL (another host) of the page this one
            copies byte for byte.
        near_duplicate_of: Path or absolute URL of the page this one nearly copies.
        template: Name of the shared template the page is written in (look-alikes), if any.
        variant: Seed of the bits a near-copy host changes (timestamp, counter, ad slot);
            ``""`` for an ordinary page.
        lookalike_of: Path of another page in the same template with a different article.
    """

    host_index: int
    index: int
    path: str
    kind: str
    links: tuple[Anchor, ...]
    base_href: str | None = None
    canonical: str | None = None
    meta_robots: str | None = None
    header_nofollow: bool = False
    text_key: str = ""
    near: bool = False
    duplicate_of: str | None = None
    near_duplicate_of: str | None = None
    template: str | None = None
    variant: str = ""
    lookalike_of: str | None = None

    @property
    def nofollow_page(self) -> bool:
        """Whether the page as a whole says nofollow (meta robots or X-Robots-Tag)."""
        return self.header_nofollow or (self.meta_robots is not None and "nofollow" in self.meta_robots)

    @property
    def noindex(self) -> bool:
        """Whether meta robots says noindex."""
        return self.meta_robots is not None and "noindex" in self.meta_robots


@dataclass(frozen=True)
class HostInfo:
    """Per-host facts, derived from the seed and the host's index.

    Attributes:
        index: Position in :attr:`SimWeb.names`.
        name: Host name (lower case).
        origin: ``http://name:port``.
        robots: The host's robots.txt spec.
        page_offset: Rotation of :data:`PAGE_CYCLE` for this host.
        slow_ms: Added response latency in milliseconds (0 for most hosts).
        trap: Whether the host has the ``/cal/`` calendar trap.
        changing: Whether the host has the changing ``/news.html`` page.
        role: ``None`` for an ordinary host, else ``mirror``, ``near`` or ``template``.
        copy_of: Index of the host a mirror or near-copy host copies.
        sitemap_index: Whether the host publishes ``/sitemap_index.xml`` (change model only).
        lastmod_honest: Whether its sitemaps' ``lastmod`` is the true last change (else the
            serving time); True where there are no sitemaps.
        sitemap_only: Number of sitemap-only pages ``/s/K.html``.
        feeds: The feeds it serves, of ``rss`` and ``atom`` (change model only).
    """

    index: int
    name: str
    origin: str
    robots: RobotsSpec
    page_offset: int
    slow_ms: int
    trap: bool
    changing: bool
    role: str | None = None
    copy_of: int | None = None
    sitemap_index: bool = False
    lastmod_honest: bool = True
    sitemap_only: int = 0
    feeds: tuple[str, ...] = ()


@dataclass
class SimResponse:
    """What the server sends for one request.

    Attributes:
        status: HTTP status.
        body: Response body (the server drops it for HEAD).
        content_type: ``Content-Type`` header.
        headers: Extra headers (``Location``, ``X-Robots-Tag``...).
        etag: Strong validator, for pages that support conditional requests.
        last_modified: ``Last-Modified`` value, with ``etag``.
        delay: Seconds the server waits before answering (slow hosts).
        version: The version served, for pages in the change model (None otherwise); such
            responses are answered per RFC 9110 (see :func:`changes.not_modified`).
        modified: Exact time the served version appeared (change model).
        previous_modified: Exact time the version before it appeared; None at version 0.
    """

    status: int
    body: bytes
    content_type: str = HTML
    headers: dict[str, str] | None = None
    etag: str | None = None
    last_modified: str | None = None
    delay: float = 0.0
    version: int | None = None
    modified: float | None = None
    previous_modified: float | None = None


def _split_target(target: str) -> tuple[str, str]:
    path, sep, query = target.partition("?")
    return path, (sep + query)


def _relative(target: str, base_dir: str) -> str:
    """Return ``target`` (a root-relative path, maybe with query) relative to ``base_dir``.

    ``base_dir`` is a directory path ending in ``/``. Hand-rolled rather than
    ``posixpath.relpath``, which is several times slower and drops trailing slashes.
    """
    path, query = _split_target(target)
    base_parts = base_dir.strip("/").split("/") if base_dir != "/" else []
    parts = path[1:].split("/")  # last part is the file name ("" for a directory)
    dirs = parts[:-1]
    common = 0
    while common < min(len(base_parts), len(dirs)) and base_parts[common] == dirs[common]:
        common += 1
    rel = "../" * (len(base_parts) - common) + "/".join(dirs[common:] + parts[-1:])
    if not rel:
        rel = "./"  # the base directory itself
    return rel + query


def _below(rng: random.Random, n: int) -> int:
    """Draw an int in ``0..n-1`` with one ``random()`` call (cheaper than ``randrange``)."""
    return int(rng.random() * n)


def _between(rng: random.Random, low: int, high: int) -> int:
    """Draw an int in ``low..high`` with one ``random()`` call."""
    return low + int(rng.random() * (high - low + 1))


def _resolve(base: str, href: str) -> str:
    """``href`` resolved against ``base`` as a correct parser does: fragment dropped, host
    lower-cased, port kept."""
    parts = urlsplit(urljoin(base, href))
    return urlunsplit((parts.scheme, parts.netloc.lower(), parts.path, parts.query, ""))


def _mixed_case(rng: random.Random, name: str) -> str:
    out = "".join(c.upper() if c.isalpha() and rng.random() < 0.5 else c for c in name)
    return out if out != name else name[:1].upper() + name[1:]


class SimWeb:
    """A deterministic synthetic web of ``hosts`` virtual hosts on one port.

    Args:
        hosts: Number of virtual hosts.
        seed: Seed of everything (names, robots kinds, pages, links, text).
        pages_per_host: Pages per host (``K``); may be large, pages are made on demand.
        port: The port the server listens on; absolute links carry it.
        latency_scale: Multiplies slow hosts' delays; 0 disables them.
        cache_size: Rendered page bodies kept in the LRU cache.
        copy_hosts_from: First host index that may be a mirror, near-copy or template host
            (see the module docstring); None for none at all.
        change_scale: Seconds per unit of the change classes' mean intervals; 0 (default)
            turns the change model off (see the module docstring and ``changes.py``).
        epoch: When changes start being counted (epoch seconds); None means now. Only used
            with the change model.
        change_mix: The change classes' shares, ``"static=0.4,slow=0.25,medium=0.2,fast=0.15"``
            (``changes.parse_mix``); None: ``changes.CHANGE_MIX``.
    """

    def __init__(
        self,
        hosts: int,
        seed: int = 1,
        pages_per_host: int = 40,
        port: int = 80,
        latency_scale: float = 1.0,
        cache_size: int = 4096,
        copy_hosts_from: int | None = COPY_HOSTS_FROM,
        change_scale: float = 0.0,
        epoch: float | None = None,
        change_mix: str | None = None,
    ) -> None:
        if not change_scale >= 0:
            raise ValueError("change_scale must be >= 0")
        if hosts < 1:
            raise ValueError("hosts must be >= 1")
        if pages_per_host < 1:
            raise ValueError("pages_per_host must be >= 1")
        self.seed = seed
        self.pages_per_host = pages_per_host
        self.port = port
        self.latency_scale = latency_scale
        self.copy_hosts_from = copy_hosts_from
        self.names: list[str] = host_names(hosts, seed)
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self._origins = [f"http://{name}:{port}" for name in self.names]
        roles = random.Random(f"simweb-roles|{seed}")
        # One offset per role for the whole web (not per host): any run of consecutive hosts
        # then covers every robots kind, and the role frequencies are exact.
        self._robots_offset = roles.randrange(len(ROBOTS_CYCLE))
        self._slow_offset = roles.randrange(25)
        self._trap_offset = roles.randrange(30)
        self._changing_offset = roles.randrange(12)
        # Page-cycle rotation of every host, needed for each cross-host link target.
        self._offsets = [zlib.crc32(f"simweb-pages|{seed}|{i}".encode()) % len(PAGE_CYCLE) for i in range(hosts)]
        self._roles = self._assign_roles(hosts)
        self._hosts: dict[int, HostInfo] = {}
        self._news_counter: dict[int, int] = {}
        self.page_model = functools.lru_cache(maxsize=cache_size)(self._page_model)
        self._page_body = functools.lru_cache(maxsize=cache_size)(self._render_body)
        # The change model: off unless change_scale > 0. Its offsets come from their own
        # stream, so everything above is what it is without it.
        self.change_scale = float(change_scale)
        self.changes: SeededChanges | None = None
        self.epoch: float | None = None
        if change_scale > 0:
            self.epoch = time.time() if epoch is None else float(epoch)
            self.changes = SeededChanges(seed, change_scale, self.epoch, parse_mix(change_mix) if change_mix else None)
        publish = random.Random(f"simweb-publish|{seed}")
        self._sitemap_offset = publish.randrange(2)
        self._lie_offset = publish.randrange(LASTMOD_LIE_CYCLE)
        self._feed_offset = publish.randrange(FEED_CYCLE)
        self._versioned = functools.lru_cache(maxsize=cache_size)(self._render_versioned)

    # ----------------------------------------------------------------------------------- hosts

    @property
    def hosts(self) -> int:
        """Number of virtual hosts."""
        return len(self.names)

    def origin(self, index: int) -> str:
        """Return ``http://name:port`` of host ``index``."""
        return self._origins[index]

    def host(self, index: int) -> HostInfo:
        """Return the facts of host ``index`` (built on first use, then kept)."""
        info = self._hosts.get(index)
        if info is None:
            info = self._make_host(index)
            self._hosts[index] = info
        return info

    def _assign_roles(self, hosts: int) -> list[tuple[str, int | None] | None]:
        """Per host, ``(role, original's index or None)``, or None for an ordinary host.

        A copy must serve its original's URL space (the same paths, or its relative links
        break), so its original is the nearest earlier host with the same page layout
        (:attr:`_offsets`) — of the kind the cycle asks for if there is one, else of the
        other kind, else the host stays ordinary. Choosing the original this way, rather
        than giving the copy its original's layout, leaves every other host's pages, and
        the links into the copy, exactly as they were without copy hosts.
        """
        roles: list[tuple[str, int | None] | None] = []
        # Per page layout, the latest ordinary and the latest template host with it.
        latest: dict[tuple[int, bool], int] = {}
        start = self.copy_hosts_from
        for i in range(hosts):
            role: tuple[str, int | None] | None = None
            wanted = HOST_ROLES.get((i - start) % COPY_CYCLE) if start is not None and i >= start else None
            if wanted is not None:
                name, from_template = wanted
                if name == "template":
                    role = (name, None)
                else:
                    offset = self._offsets[i]
                    original = latest.get((offset, from_template), latest.get((offset, not from_template)))
                    if original is not None:
                        role = (name, original)
            roles.append(role)
            if role is None or role[0] == "template":
                latest[(self._offsets[i], role is not None)] = i
        return roles

    def _make_host(self, i: int) -> HostInfo:
        name = self.names[i]
        kind = ROBOTS_CYCLE[(i + self._robots_offset) % len(ROBOTS_CYCLE)]
        rng = random.Random(f"simweb-host|{self.seed}|{i}")
        slow = (i + self._slow_offset) % 25 == 4
        role = self._roles[i]
        copy_of = role[1] if role is not None else None
        # A copy serves its original's site, trap and changing page included.
        site = i if copy_of is None else copy_of
        origin = self.origin(i)
        robots = robots_spec(kind, name, origin)
        sitemap_index, honest, sitemap_only, host_feeds = False, True, 0, ()
        if self.changes is not None:
            # Sitemaps are the host's own (they follow its robots.txt); feeds and the feed
            # links in the root page are its site's, so a mirror's root stays its original's.
            sitemap_index = kind in ROBOTS_TEXT_KINDS and (
                kind == "private_sitemap" or (i + self._sitemap_offset) % 2 == 0
            )
            if sitemap_index:
                honest = (i // 2 + self._lie_offset) % LASTMOD_LIE_CYCLE != 0
                low, high = SITEMAP_ONLY_PAGES
                sitemap_only = low + zlib.crc32(f"simweb-sitemap-only|{self.seed}|{i}".encode()) % (high - low + 1)
            host_feeds = self.site_feeds(site)
            named = ([origin + SITEMAP_INDEX] if sitemap_index else []) + [origin + FEED_PATHS[f] for f in host_feeds]
            robots = robots_spec(kind, name, origin, tuple(named))
        return HostInfo(
            index=i,
            name=name,
            origin=origin,
            robots=robots,
            page_offset=self._offsets[i],
            slow_ms=_between(rng, 50, 300) if slow else 0,
            trap=(site + self._trap_offset) % 30 == 13,
            changing=(site + self._changing_offset) % 12 == 5,
            role=role[0] if role is not None else None,
            copy_of=copy_of,
            sitemap_index=sitemap_index,
            lastmod_honest=honest,
            sitemap_only=sitemap_only,
            feeds=host_feeds,
        )

    def site_feeds(self, site: int) -> tuple[str, ...]:
        """The feeds a site serves with the change model on (``rss``, ``atom``), else ()."""
        if self.changes is None:
            return ()
        return _FEED_KINDS.get((site + self._feed_offset) % FEED_CYCLE, ())

    def template_of(self, hi: int) -> str | None:
        """The template host ``hi``'s pages are written in (its original's, for a copy)."""
        role = self._roles[hi]
        if role is None:
            return None
        if role[0] == "template":
            return TEMPLATE
        assert role[1] is not None
        return self.template_of(role[1])

    # ----------------------------------------------------------------------------------- paths

    def page_kind(self, host_index: int, j: int) -> str:
        """Return the kind of page ``j`` of a host (``root`` for page 0)."""
        if j == 0:
            return "root"
        kind = PAGE_CYCLE[(j + self._offsets[host_index]) % len(PAGE_CYCLE)]
        if kind in ("dup", "near") and j == 1:
            # Page 0 is "/", in another directory: a copy would resolve its links differently.
            return "p"
        return kind

    def page_path(self, host_index: int, j: int) -> str:
        """Return the path of page ``j`` of a host."""
        kind = self.page_kind(host_index, j)
        if kind == "root":
            return "/"
        if kind in ("p", "dup", "near"):
            return f"/p/{j}.html"
        section = SECTIONS[j % len(SECTIONS)]
        if kind == "docs":
            return f"/docs/{section}/{j}.html"
        if kind == "draft":
            return f"/docs/{section}/draft-{j}.html"
        if kind == "public":
            return f"/docs/public/{j}.html"
        if kind == "private":
            return f"/private/{j}.html"
        if kind == "pdf":
            return f"/files/{j}.pdf"
        raise AssertionError(kind)

    def page_index(self, host_index: int, path: str) -> int | None:
        """Return ``j`` if ``path`` (no query) is page ``j`` of the host, else None."""
        if path == "/":
            return 0
        m = _PAGE_RE.match(path)
        if m is None:
            return None
        j = int(m.group(1))
        if j >= self.pages_per_host or self.page_path(host_index, j) != path:
            return None
        return j

    def url(self, host_index: int, target: str) -> str:
        """Return the absolute URL of a root-relative target on a host."""
        return self._origins[host_index] + target

    # ----------------------------------------------------------------------------------- pages

    def _page_model(self, hi: int, j: int) -> PageModel:
        role = self._roles[hi]
        if role is not None and role[1] is not None:
            return self._copy_model(hi, role[0], role[1], j)
        kind = self.page_kind(hi, j)
        path = self.page_path(hi, j)
        if kind in ("dup", "near"):
            # A copy of page j-1 (an ordinary page in the same directory): same links, same
            # base, same canonical (so it names its original), same text stream.
            original = self.page_model(hi, j - 1)
            return replace(
                original,
                index=j,
                path=path,
                kind=kind,
                near=kind == "near",
                duplicate_of=original.path if kind == "dup" else None,
                near_duplicate_of=original.path if kind == "near" else None,
            )
        text_key = f"simweb-text|{self.seed}|{hi}|{j}"
        if kind == "pdf":
            return PageModel(hi, j, path, kind, (), text_key=text_key)
        template = self.template_of(hi)
        rng = random.Random(f"simweb-page|{self.seed}|{hi}|{j}")
        origin = self.origin(hi)
        base_href: str | None = None
        if kind != "root" and rng.random() < 0.10:
            base_href = rng.choice(("/", "/docs/", f"{origin}/p/"))
        canonical = f"{origin}{path}" if rng.random() < 0.20 else None
        meta_robots: str | None = None
        header_nofollow = False
        if kind != "root":
            # Never on the root, so a crawl from "/" always gets into the site.
            r = rng.random()
            if r < 0.04:
                meta_robots = "nofollow"
            elif r < 0.06:
                meta_robots = "noindex, nofollow"
            elif r < 0.09:
                meta_robots = "noindex"
            header_nofollow = rng.random() < 0.02
        base_dir = base_href if base_href is not None else path
        if base_dir.startswith("http"):
            base_dir = base_dir[len(origin) :]
        base_dir = base_dir[: base_dir.rfind("/") + 1]
        links: list[Anchor] = []
        seen: set[str] = set()
        for target in self._internal_targets(rng, hi, j):
            url = f"{origin}{target}"
            if url not in seen:
                seen.add(url)
                links.append(self._internal_link(rng, hi, target, base_dir))
        for _ in range(_between(rng, 1, 5)):
            if self.hosts < 2:
                break
            other = _below(rng, self.hosts - 1)
            other += other >= hi
            target_pages = min(self.pages_per_host, EXTERNAL_TARGET_PAGES)
            target = self.page_path(other, _below(rng, target_pages))
            url = f"{self.origin(other)}{target}"
            if url not in seen:
                seen.add(url)
                links.append(self._external_link(rng, other, target))
        return PageModel(
            hi,
            j,
            path,
            kind,
            tuple(links),
            base_href=base_href,
            canonical=canonical,
            meta_robots=meta_robots,
            header_nofollow=header_nofollow,
            text_key=text_key,
            template=template,
            variant=f"simweb-variant|{self.seed}|{hi}|{j}" if template else "",
            lookalike_of=self._lookalike(hi, j) if template else None,
        )

    def _lookalike(self, hi: int, j: int) -> str:
        """Another page of host ``hi`` in the same template (the root, or page 1 for the root)."""
        return self.page_path(hi, 1 if j == 0 and self.pages_per_host > 1 else 0)

    def _copy_model(self, hi: int, role: str, original: int, j: int) -> PageModel:
        """Page ``j`` of a mirror or near-copy host: its original's page, links resolved here.

        The page keeps its original's markup (hrefs, base, canonical), so relative links now
        lead around this host and absolute ones to wherever they pointed. ``duplicate_of`` /
        ``near_duplicate_of`` name the original's page that first had these bytes (absolute).
        """
        src = self.page_model(original, j)
        origin = self.origin(original)
        first = src.duplicate_of or src.path  # where the original's bytes first appeared
        root_url = first if first.startswith("http") else origin + first
        page_url = self.origin(hi) + src.path
        base = urljoin(page_url, src.base_href) if src.base_href is not None else page_url
        links = tuple(link._replace(url=_resolve(base, link.href)) for link in src.links)
        exact = role == "mirror" or src.kind == "pdf"  # a near copy cannot vary a PDF
        return replace(
            src,
            host_index=hi,
            links=links,
            duplicate_of=root_url if exact else None,
            near_duplicate_of=None if exact else root_url,
            variant=src.variant if exact else f"simweb-variant|{self.seed}|{hi}|{j}",
            lookalike_of=src.lookalike_of,
        )

    def _internal_targets(self, rng: random.Random, hi: int, j: int) -> list[str]:
        k = self.pages_per_host
        info = self.host(hi)
        targets: list[str] = []
        if j == 0:
            targets.extend(self.page_path(hi, n) for n in range(1, min(k, ROOT_LINKS + 1)))
            if info.changing:
                targets.append("/news.html")
            if info.trap:
                targets.append(TRAP_ENTRY)
        else:
            # The chain makes every page reachable from the root even for huge K.
            targets.extend(self.page_path(hi, n) for n in (j + 1, j + 2) if n < k)
        for _ in range(_between(rng, 5, 15) - min(len(targets), 5)):
            r = rng.random()
            if r < 0.07:
                targets.append(f"/r/{_below(rng, k)}")
            elif r < 0.12:
                if rng.random() < 0.5:
                    targets.append(f"/p/{k + _below(rng, 50)}.html")
                else:
                    targets.append(f"/missing/{_below(rng, 1000)}.html")
            elif r < 0.15:
                targets.append(f"/err/{_below(rng, 100)}.html")
            elif r < 0.20:
                targets.append(self.page_path(hi, _below(rng, k)) + "?print=1")
            elif r < 0.22 and info.trap:
                targets.append(TRAP_ENTRY)
            else:
                targets.append(self.page_path(hi, _below(rng, k)))
        return targets

    def _internal_link(self, rng: random.Random, hi: int, target: str, base_dir: str) -> Anchor:
        name = self.names[hi]
        r = rng.random()
        if r < 0.35:
            href = _relative(target, base_dir)
        elif r < 0.40:
            rel = _relative(target, base_dir)
            href = rel if rel.startswith(".") else "./" + rel
        elif r < 0.70:
            href = target
        elif r < 0.85:
            href = f"http://{name}:{self.port}{target}"
        elif r < 0.93:
            href = f"http://{_mixed_case(rng, name)}:{self.port}{target}"
        else:
            href = f"//{name}:{self.port}{target}"
        return self._finish_link(rng, href, f"http://{name}:{self.port}{target}")

    def _external_link(self, rng: random.Random, other: int, target: str) -> Anchor:
        name = self.names[other]
        r = rng.random()
        if r < 0.70:
            host = name
        elif r < 0.90:
            host = _mixed_case(rng, name)
        else:
            return self._finish_link(rng, f"//{name}:{self.port}{target}", self.url(other, target))
        return self._finish_link(rng, f"http://{host}:{self.port}{target}", self.url(other, target))

    @staticmethod
    def _finish_link(rng: random.Random, href: str, url: str) -> Anchor:
        if rng.random() < 0.12:
            href += f"#sec{_between(rng, 1, 7)}"
        nofollow = rng.random() < 0.05
        r = rng.random()
        style = 0 if r < 0.80 else (1 if r < 0.92 else 2)
        return Anchor(href=href, url=url, nofollow=nofollow, style=style)

    def _render_body(self, hi: int, j: int) -> tuple[bytes, str]:
        role = self._roles[hi]
        if role is not None and role[0] == "mirror" and role[1] is not None:
            return self._page_body(role[1], j)  # byte for byte
        model = self.page_model(hi, j)
        if model.kind == "pdf":
            body = render_pdf(model.text_key)
        else:
            # A copy shows its original's name in the chrome (it is the original's page).
            site = self.names[role[1]] if role is not None and role[1] is not None else self.names[hi]
            body = render_page(model, model.text_key, site)
        return body, f'"{zlib.crc32(body):08x}-{len(body):x}"'

    def page_body(self, host_index: int, j: int) -> bytes:
        """Return the exact bytes served for page ``j`` of a host."""
        return self._page_body(host_index, j)[0]

    # ---------------------------------------------------------------------------- change model

    def _site(self, hi: int) -> int:
        role = self._roles[hi]
        return role[1] if role is not None and role[1] is not None else hi

    def change_key(self, host_index: int, page: int | str) -> tuple[int, PageKey] | None:
        """The change key ``(site, source)`` of a page, or None when it does not change.

        Args:
            host_index: Host index.
            page: Page number ``j``, a request target (``/p/3.html``, ``/s/2.html``,
                ``/?print=1``...), or ``"sK"`` for sitemap-only page ``K``.

        Returns:
            None with the change model off, and for PDFs and anything that is not a page.
            Copies share their original's key: a mirror's or near-copy's page that of its
            original host, a ``dup`` / ``near`` page that of the page it copies; a
            sitemap-only page ``/s/K.html`` has ``(host, "sK")``.
        """
        if self.changes is None:
            return None
        ref = self._page_ref(host_index, page)
        if ref is None:
            return None
        if isinstance(ref, str):
            return host_index, ref
        j = ref
        if not 0 <= j < self.pages_per_host:
            return None
        site = self._site(host_index)
        kind = self.page_kind(site, j)
        if kind == "pdf":
            return None
        return site, (j - 1 if kind in ("dup", "near") else j)

    def _page_ref(self, hi: int, page: int | str) -> int | str | None:
        """``j`` for a numbered page, ``"sK"`` for a sitemap-only page, None for anything else."""
        if isinstance(page, int):
            return page
        if not page.startswith("/"):
            m = re.fullmatch(r"s(0|[1-9][0-9]*)", page)
            if m is None or int(m.group(1)) >= self.host(hi).sitemap_only:
                return None
            return page
        what, args = self.classify(hi, page)
        if what == "sitemap_only":
            return f"s{args[0]}"
        return args[0] if what == "page" else None

    def _key(self, host_index: int, page: int | str) -> tuple[int, PageKey]:
        key = self.change_key(host_index, page)
        if key is None:
            raise ValueError(
                f"page {page!r} of host {host_index} is not in the change model"
                + (" (the change model is off)" if self.changes is None else "")
            )
        return key

    def change_class(self, host_index: int, page: int | str) -> str | None:
        """The change class of a page (``static``, ``slow``, ``medium``, ``fast``), or None
        when it is not in the change model."""
        key = self.change_key(host_index, page)
        return None if key is None or self.changes is None else self.changes.change_class(*key)

    def mean_interval(self, host_index: int, page: int | str) -> float | None:
        """Mean seconds between the page's changes; None for static pages (and pages outside
        the change model)."""
        key = self.change_key(host_index, page)
        return None if key is None or self.changes is None else self.changes.mean_interval(*key)

    def version_at(self, host_index: int, page: int | str, t: float) -> int:
        """The page's version at time ``t``: its changes in ``(epoch, t]``.

        Raises:
            ValueError: If the page is not in the change model.
        """
        key = self._key(host_index, page)
        return self.changes.version_at(*key, t)  # type: ignore[union-attr]

    def change_times(self, host_index: int, page: int | str, until: float) -> list[float]:
        """The times of the page's changes in ``(epoch, until]``, ascending."""
        key = self._key(host_index, page)
        return self.changes.change_times(*key, until)  # type: ignore[union-attr]

    def last_change(self, host_index: int, page: int | str, t: float) -> float:
        """When the version current at ``t`` appeared; for version 0 the model's
        ``version0_time`` (the epoch rounded down to the second minus 30 days)."""
        key = self._key(host_index, page)
        return self.changes.last_change(*key, t)  # type: ignore[union-attr]

    def versioned_body(self, host_index: int, page: int | str, version: int) -> bytes:
        """The bytes of a change-model page at ``version`` (``page`` as for :meth:`change_key`)."""
        self._key(host_index, page)
        ref = self._page_ref(host_index, page)
        assert ref is not None
        return self._versioned(host_index, ref, version)[0]

    def _render_versioned(self, hi: int, page: int | str, version: int) -> tuple[bytes, str]:
        """``(body, ETag)`` of page ``page`` (``j``, or ``"sK"``) of host ``hi`` at ``version``."""
        key = self._key(hi, page)
        if isinstance(page, str):
            base = self._sitemap_only_body(hi, int(page[1:]))
        else:
            base = self._page_body(hi, page)[0]
            if page == 0:
                base = self._with_feed_links(base, self.site_feeds(self._site(hi)))
        if version > 0:
            rng = random.Random(f"simweb-update|{self.seed}|{key[0]}|{key[1]}|{version}")
            text = " ".join(words(rng, _between(rng, 25, 50)))
            para = f'<p class="update">Updated (revision {version}): {text[:1].upper()}{text[1:]}.</p>\n'
            at = base.rfind(b"<footer")
            if at < 0:
                at = base.rfind(b"</body>")
            base = base[:at] + para.encode() + base[at:]
        return base, f'"{zlib.crc32(base):08x}-{len(base):x}-v{version}"'

    @staticmethod
    def _with_feed_links(body: bytes, site_feeds: tuple[str, ...]) -> bytes:
        if not site_feeds:
            return body
        links = "".join(
            f'<link rel="alternate" type="{FEED_TYPES[f]}" title="{f.upper()}" href="{FEED_PATHS[f]}">\n'
            for f in site_feeds
        ).encode()
        marker = b'<meta charset="utf-8">\n'
        at = body.find(marker)
        at = at + len(marker) if at >= 0 else body.find(b"</head>")
        return body[:at] + links + body[at:]

    def sitemap_only_model(self, hi: int, k: int) -> PageModel:
        """The structure of sitemap-only page ``/s/K.html``: links to the root and one page."""
        origin = self.origin(hi)
        targets = ["/"]
        if self.pages_per_host > 1:
            targets.append(self.page_path(hi, 1 + k % (self.pages_per_host - 1)))
        links = tuple(Anchor(href=t, url=origin + t) for t in targets)
        return PageModel(hi, k, f"/s/{k}.html", "sitemap_only", links, text_key=f"simweb-s-text|{self.seed}|{hi}|{k}")

    def _sitemap_only_body(self, hi: int, k: int) -> bytes:
        return render_page(self.sitemap_only_model(hi, k), f"simweb-s-text|{self.seed}|{hi}|{k}", self.names[hi])

    def _page_response(
        self, hi: int, page: int | str, now: float, delay: float, headers: dict[str, str] | None
    ) -> SimResponse:
        changes = self.changes
        assert changes is not None
        key = self._key(hi, page)
        version = changes.version_at(*key, now)
        body, etag = self._versioned(hi, page, version)
        modified = changes.change_time(*key, version)
        previous = changes.change_time(*key, version - 1) if version > 0 else None
        return SimResponse(200, body, HTML, headers, etag, http_date(modified), delay, version, modified, previous)

    # ---------------------------------------------------------------------- sitemaps and feeds

    def listed_pages(self, hi: int) -> list[str]:
        """Paths of the change-model pages the host's sitemaps (and feeds) list, in page order:
        every page but PDFs among its first :data:`SITEMAP_LIST_PAGES`."""
        count = min(self.pages_per_host, SITEMAP_LIST_PAGES)
        return [self.page_path(hi, j) for j in range(count) if self.page_kind(hi, j) != "pdf"]

    def sitemap_only_paths(self, hi: int) -> list[str]:
        """Paths of the host's sitemap-only pages (none unless it is a sitemap host)."""
        return [f"/s/{k}.html" for k in range(self.host(hi).sitemap_only)]

    def sitemap_entries(self, hi: int) -> dict[str, list[str]]:
        """``{child sitemap path: [listed page paths]}`` of a sitemap host (empty otherwise)."""
        if self.changes is None or not self.host(hi).sitemap_index:
            return {}
        listed, only = self.listed_pages(hi), self.sitemap_only_paths(hi)
        half = (len(listed) + 1) // 2
        return {
            SITEMAP_FILES[0]: listed[:half] + only[0::2],
            SITEMAP_FILES[1]: listed[half:] + only[1::2],
        }

    def _lastmod(self, hi: int, path: str, now: float) -> float:
        if not self.host(hi).lastmod_honest:
            return now
        return self.last_change(hi, path, now)

    def _sitemap_file_body(self, hi: int, n: int, now: float) -> bytes:
        paths = self.sitemap_entries(hi)[SITEMAP_FILES[n]]
        doc = feeds.urlset([(self.url(hi, p), self._lastmod(hi, p, now)) for p in paths])
        return feeds.gzipped(doc) if SITEMAP_FILES[n].endswith(".gz") else doc

    def _sitemap_index_body(self, hi: int, now: float) -> bytes:
        children = []
        for child, paths in self.sitemap_entries(hi).items():
            stamp = max((self._lastmod(hi, p, now) for p in paths), default=now)
            children.append((self.url(hi, child), stamp))
        return feeds.sitemap_index(children)

    def feed_items(self, hi: int, now: float) -> list[tuple[str, float]]:
        """``(absolute URL, last change)`` of the (up to) :data:`FEED_ITEMS` listed pages that
        changed most recently at ``now``, newest first (ties in page order)."""
        dated = [(self.last_change(hi, p, now), n, p) for n, p in enumerate(self.listed_pages(hi))]
        dated.sort(key=lambda x: (-x[0], x[1]))
        return [(self.url(hi, p), t) for t, _, p in dated[:FEED_ITEMS]]

    def _feed_body(self, hi: int, kind: str, now: float) -> bytes:
        items = [(url, "Page " + url[len(self.origin(hi)) :], t) for url, t in self.feed_items(hi, now)]
        title = self.names[self._site(hi)]
        root = self.url(hi, "/")
        if kind == "rss":
            return feeds.rss(title, root, items, now)
        return feeds.atom(title, root, self.url(hi, FEED_PATHS["atom"]), items, now)

    # ----------------------------------------------------------------------- special resources

    def news_links(self, hi: int) -> list[str]:
        """Return the absolute links of a changing host's ``/news.html``."""
        return [self.url(hi, self.page_path(hi, n)) for n in range(min(self.pages_per_host, 6))]

    def _news_body(self, hi: int, edition: int) -> bytes:
        rng = random.Random(f"simweb-news|{self.seed}|{hi}|{edition}")
        paras = "\n".join("<p>" + " ".join(words) + ".</p>" for words in render_paragraphs(rng, 3, 30, 60))
        links = "\n".join(f'<li><a href="{u}">{u}</a></li>' for u in self.news_links(hi))
        return (
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
            f"<title>News edition {edition}</title></head>\n<body>\n"
            f"<h1>Edition {edition}</h1>\n{paras}\n<ul>\n{links}\n</ul>\n</body></html>\n"
        ).encode()

    @staticmethod
    def _cal_neighbours(year: int, month: int) -> list[tuple[int, int]]:
        prev = (year, month - 1) if month > 1 else (year - 1, 12)
        nxt = (year, month + 1) if month < 12 else (year + 1, 1)
        return [ym for ym in (prev, nxt) if 1 <= ym[0] <= 9999]

    def cal_links(self, hi: int, year: int, month: int) -> list[str]:
        """Return the absolute links of a calendar trap page."""
        return [self.url(hi, f"/cal/{y:04d}/{m:02d}.html") for y, m in self._cal_neighbours(year, month)]

    def _cal_body(self, year: int, month: int) -> bytes:
        # Relative links, as real calendars have: "../2024/02.html" keeps the trap infinite.
        items = "\n".join(
            f'<li><a href="../{y:04d}/{m:02d}.html">{y:04d}-{m:02d}</a></li>'
            for y, m in self._cal_neighbours(year, month)
        )
        return (
            f"<!DOCTYPE html>\n<html><head><title>Calendar {year:04d}-{month:02d}</title></head>\n"
            f"<body>\n<h1>{year:04d}-{month:02d}</h1>\n<ul>\n{items}\n</ul>\n</body></html>\n"
        ).encode()

    def sitemap_links(self, hi: int) -> list[str]:
        """Return the URLs listed in a host's ``/sitemap.xml``."""
        count = min(self.pages_per_host, SITEMAP_PAGES)
        return [self.url(hi, self.page_path(hi, n)) for n in range(count)]

    def _sitemap_body(self, hi: int) -> bytes:
        urls = "\n".join(f"  <url><loc>{u}</loc></url>" for u in self.sitemap_links(hi))
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{urls}\n</urlset>\n"
        ).encode()

    def redirect_target(self, hi: int, n: int) -> tuple[str, str]:
        """Return ``(Location header, absolute target URL)`` of ``/r/n`` on a host."""
        target = self.page_path(hi, n) if n < self.pages_per_host else f"/p/{n}.html"
        # Both Location forms occur on the web; the crawler must resolve the relative one.
        location = self.url(hi, target) if n % 2 == 0 else target
        return location, self.url(hi, target)

    # -------------------------------------------------------------------------------- dispatch

    def classify(self, hi: int, target: str) -> tuple[str, tuple[int, ...]]:
        """Say what a request target is on a host, without side effects.

        Args:
            hi: Host index.
            target: Path with optional query string.

        Returns:
            ``(what, args)``: ``what`` is one of ``robots``, ``robots_real``, ``page``,
            ``redirect``, ``error``, ``sitemap``, ``news``, ``cal``, ``not_found``, and with the
            change model ``sitemap_index``, ``sitemap_file``, ``sitemap_only``, ``feed``;
            ``args`` holds the page number, redirect number, (year, month), the child
            sitemap's position in :data:`SITEMAP_FILES`, ``K`` of ``/s/K.html`` or the feed
            kind.
        """
        path, _ = _split_target(target)
        info = self.host(hi)
        if path == "/robots.txt":
            return "robots", ()
        if path == ROBOTS_REDIRECT_TARGET and info.robots.kind == "redirect":
            return "robots_real", ()
        j = self.page_index(hi, path)
        if j is not None:
            return "page", (j,)
        m = _REDIRECT_RE.match(path)
        if m is not None:
            return "redirect", (int(m.group(1)),)
        m = _ERROR_RE.match(path)
        if m is not None:
            return "error", (int(m.group(1)),)
        if self.changes is not None:
            if info.sitemap_index:
                if path == SITEMAP_INDEX:
                    return "sitemap_index", ()
                if path in SITEMAP_FILES:
                    return "sitemap_file", (SITEMAP_FILES.index(path),)
                m = _SONLY_RE.match(path)
                if m is not None and int(m.group(1)) < info.sitemap_only:
                    return "sitemap_only", (int(m.group(1)),)
            for feed in info.feeds:
                if path == FEED_PATHS[feed]:
                    return "feed", (feed,)
        elif path == "/sitemap.xml" and info.robots.sitemaps:
            return "sitemap", ()
        if path == "/news.html" and info.changing:
            return "news", ()
        m = _CAL_RE.match(path) if info.trap else None
        if m is not None:
            year, month = int(m.group(1)), int(m.group(2))
            if 1 <= year <= 9999 and 1 <= month <= 12:
                return "cal", (year, month)
        return "not_found", ()

    def respond(self, host: str, target: str, now: float | None = None) -> SimResponse:
        """Answer one request.

        Args:
            host: Host name, lower case, without port.
            target: Path with optional query string, as sent.
            now: The request's time (epoch seconds), which picks the versions served by the
                change model; None means the clock's now. Unused with the model off.

        Returns:
            The response; the server adds conditional-request handling and the delay.
        """
        hi = self.index.get(host)
        if hi is None:
            return self._unknown_host(host, target)
        info = self.host(hi)
        delay = info.slow_ms * self.latency_scale / 1000.0
        what, args = self.classify(hi, target)
        if what == "page":
            (j,) = args
            body, etag = self._page_body(hi, j)
            model = self.page_model(hi, j)
            headers = {"X-Robots-Tag": "nofollow"} if model.header_nofollow else None
            if self.changes is not None and model.kind != "pdf":
                return self._page_response(hi, j, time.time() if now is None else now, delay, headers)
            ctype = "application/pdf" if model.kind == "pdf" else HTML
            return SimResponse(200, body, ctype, headers, etag, LAST_MODIFIED, delay)
        if what == "robots":
            spec = info.robots
            if spec.kind == "redirect":
                assert spec.location is not None
                moved = {"Location": spec.location}
                return SimResponse(301, b"Moved Permanently\n", "text/plain", moved, delay=delay)
            return SimResponse(spec.status, spec.body, "text/plain; charset=utf-8", delay=delay)
        if what == "robots_real":
            return SimResponse(200, info.robots.body, "text/plain; charset=utf-8", delay=delay)
        if what == "redirect":
            location, _ = self.redirect_target(hi, args[0])
            body = f'<html><body><a href="{location}">moved</a></body></html>\n'.encode()
            return SimResponse(301, body, HTML, {"Location": location}, delay=delay)
        if what == "error":
            body = b"<html><body>Internal Server Error</body></html>\n"
            return SimResponse(500, body, delay=delay)
        if what == "sitemap":
            return SimResponse(200, self._sitemap_body(hi), "application/xml", delay=delay)
        if what == "news":
            # The only stateful resource: each serving is a new edition.
            edition = self._news_counter.get(hi, 0) + 1
            self._news_counter[hi] = edition
            return SimResponse(200, self._news_body(hi, edition), HTML, delay=delay)
        if what == "cal":
            return SimResponse(200, self._cal_body(*args), HTML, delay=delay)
        if what in ("sitemap_index", "sitemap_file", "sitemap_only", "feed"):
            t = time.time() if now is None else now
            if what == "sitemap_only":
                return self._page_response(hi, f"s{args[0]}", t, delay, None)
            if what == "sitemap_index":
                return SimResponse(200, self._sitemap_index_body(hi, t), XML_TYPE, delay=delay)
            if what == "sitemap_file":
                ctype = GZIP_TYPE if SITEMAP_FILES[args[0]].endswith(".gz") else XML_TYPE
                return SimResponse(200, self._sitemap_file_body(hi, args[0], t), ctype, delay=delay)
            return SimResponse(200, self._feed_body(hi, args[0], t), FEED_TYPES[args[0]], delay=delay)
        return SimResponse(404, b"<html><body>Not Found</body></html>\n", delay=delay)

    def _unknown_host(self, host: str, target: str) -> SimResponse:
        # Requests by IP or "localhost" get a directory of the web, handy for the demo and for
        # seeding a crawl; any other unknown name is a 404 as on a real shared server.
        path, _ = _split_target(target)
        if host in ("127.0.0.1", "localhost", "::1") or host.replace(".", "").isdigit():
            if path == "/seeds.txt":
                body = "".join(f"{self.origin(i)}/\n" for i in range(self.hosts)).encode()
                return SimResponse(200, body, "text/plain; charset=utf-8")
            if path == "/":
                items = "".join(
                    f'<li><a href="{self.origin(i)}/">{self.names[i]}</a></li>\n' for i in range(self.hosts)
                )
                body = f"<html><body><h1>simweb</h1><ul>\n{items}</ul></body></html>\n".encode()
                return SimResponse(200, body)
        return SimResponse(404, b"<html><body>Unknown host</body></html>\n")
