"""Parse: links (absolute, ``<base>``, ``rel=canonical``, nofollow), meta robots and
``X-Robots-Tag``, title, a content checksum and a simhash of the visible text, for every
fetched page.

A redirect's ``Location`` becomes a link of kind ``redirect``, so its target goes through
the URL-seen check, robots and politeness like any other URL. What a 2xx body is comes from
its Content-Type *and* its first bytes (:func:`beamcrawl.core.content.sniff.sniff`): only HTML and
XHTML are parsed, so a PNG labelled ``text/html`` yields no garbage links. Other bodies are
checksummed (the exact-copy key) but not parsed, and counted as
``parse/skipped_<kind>`` (``skipped_xml``, ``skipped_text``, ``skipped_binary_pdf``, ...).

The simhash (:mod:`beamcrawl.core.content.textfp`) is computed here, where the page is already in
hand, for the content-seen stage that follows; a page with too little text gets none.

Discovery beyond links: a robots.txt's ``Sitemap:`` lines and an HTML page's RSS/Atom
``<link rel=alternate>`` become links of kind ``sitemap`` / ``feed`` (queued to be read, not
shown), and a URL fetched as a sitemap or feed (``FrontierEntry.kind``) is read with
:func:`beamcrawl.core.content.sitemaps.parse` (gzip, XML without entities, the 50,000 URL / 50 MB
limits): its URLs become links of kind ``listed`` with their lastmod, an index's child
sitemaps links of kind ``sitemap`` (from a sitemap named by robots.txt or submitted, not
from one found in an index: indexes do not nest).
"""

from __future__ import annotations

from typing import Any, Iterator

import apache_beam as beam
from apache_beam.metrics import Metrics

from beamcrawl.core.content import sitemaps, sniff, textfp
from beamcrawl.core.net.wire import header_url
from beamcrawl.core.content.htmlparse import (
    MAX_LINKS,
    checksum,
    page_links,
    parse_bounded,
    robots_directives,
)
from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.core.runtime import gctune
from beamcrawl.core.urls import hostkeys, urlnorm
from beamcrawl.core.urls.urlnorm import InvalidURL, fingerprint, host_of, normalize
from beamcrawl.schemas.records import FetchResult, Link, LinkColumns, ParsedPage
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collect

__all__ = [
    "PARSED_KINDS",
    "ParsePages",
    "body_kind",
    "parse_fetch",
    "robots_sitemap_links",
    "sitemap_links",
    "skipped_counter_name",
]

REDIRECTS = (301, 302, 303, 307, 308)
PARSED_KINDS = ("html", "xhtml")  # the body kinds parsed for links and text


def body_kind(result: FetchResult) -> str:
    """What a body is, by label and first bytes: ``html``, ``xhtml``, ``xml``, ``text`` or
    ``binary:<kind>`` (see :func:`beamcrawl.core.content.sniff.sniff`)."""
    return sniff.sniff(result.content_type, result.body[: sniff.SNIFF_BYTES])


def skipped_counter_name(kind: str) -> str:
    """The ``parse`` counter of 2xx bodies of ``kind`` left unparsed (``binary:pdf`` →
    ``skipped_binary_pdf``: metric names keep to letters, digits and ``_``)."""
    return "skipped_" + kind.replace(":", "_")


def link_host(url: str) -> str:
    """A normalised link's ``host_of``, found once where it is parsed (``Link.host``); ""
    for a URL with none (the stages that need it then refuse it themselves)."""
    try:
        return host_of(url)
    except InvalidURL:
        return ""


def html_link_columns(found: list[tuple[str, int, str, bool, str]]) -> LinkColumns:
    """The links :func:`~beamcrawl.core.content.htmlparse.page_links` found, ``(url, fp,
    anchor, nofollow, kind)`` each, as a page's :class:`LinkColumns` (no dates; each URL's
    politeness slot found once, here)."""
    if not found:
        return LinkColumns([], [], [], [], [])
    urls, fps, anchors, nofollow, kinds = map(list, zip(*found))
    return LinkColumns(urls, fps, anchors, nofollow, kinds, None, [link_host(url) for url in urls])


def _link(url: str, base: str, kind: str, lastmod: float | None = None) -> Link | None:
    try:
        target = normalize(url.strip(), base)
    except InvalidURL:
        return None
    return Link(url=target, fp=fingerprint(target), kind=kind, lastmod=lastmod, host=link_host(target))


def robots_sitemap_links(result: FetchResult, token: str) -> list[Link]:
    """The ``Sitemap:`` lines of a fetched 2xx robots.txt, as links of kind ``sitemap``."""
    if not 200 <= result.status < 300:
        return []
    rules = RobotsRules.parse(result.body, token, result.status)
    found = (_link(url, result.url, "sitemap") for url in rules.sitemaps())
    return [link for link in found if link is not None]


def sitemap_links(result: FetchResult, max_bytes: int = sitemaps.MAX_BYTES) -> tuple[list[Link], str | None, str]:
    """A fetched sitemap's or feed's URLs (``listed``) and child sitemaps (``sitemap``).

    Returns ``(links, problem, document kind)``; a malformed or oversized document gives
    what was read before the problem.
    """
    entry = result.entry
    origins = (entry.robots_origin,) if entry.robots_origin else ()
    doc = sitemaps.parse(result.body, result.final_url or result.url, robots_origins=origins, max_bytes=max_bytes)
    links = [
        Link(url=e.url, fp=fingerprint(e.url), kind="listed", lastmod=e.lastmod, host=link_host(e.url))
        for e in doc.urls
    ]
    if entry.depth == 0:  # named by robots.txt or submitted: an index's children are read too
        links += [
            Link(url=e.url, fp=fingerprint(e.url), kind="sitemap", lastmod=e.lastmod, host=link_host(e.url))
            for e in doc.sitemaps
        ]
    problem = doc.error or (f"truncated at the {doc.truncated} limit" if doc.truncated else None)
    return links, problem, doc.kind


def parse_fetch(
    result: FetchResult, token: str, max_sitemap_bytes: int = sitemaps.MAX_BYTES, max_links: int = MAX_LINKS
) -> ParsedPage:
    """What one fetch says: pure, so it is tested without a runner.

    An HTML page gives at most ``max_links`` links (0: all), the first in document order
    (:func:`~beamcrawl.core.content.htmlparse.page_links`); one that had more is marked
    ``links_capped``, and ``parse_truncated`` is ``links`` when no parse limit cut it first.
    """
    page = ParsedPage(fetch=result)
    if result.outcome != "fetched":
        return page
    page.checksum = checksum(result.body)
    x_robots = [v for k, v in result.response_headers if k.lower() == "x-robots-tag"]
    page.meta_noindex, page.meta_nofollow = robots_directives(x_robots, token)
    if result.entry.source == "robots":
        page.links = robots_sitemap_links(result, token)
        return page
    if result.status in REDIRECTS:
        location = result.header("location")
        if location:
            try:
                # The URL its bytes name: read as UTF-8 when they are (wire.header_url), the
                # spaces and controls around it dropped by normalize, as browsers drop them
                # (str.strip took a no-break space, which a URL keeps, as %C2%A0).
                target = normalize(header_url(location), result.url)
                page.links.append(Link(url=target, fp=fingerprint(target), kind="redirect", host=link_host(target)))
            except InvalidURL:
                page.parse_error = "bad redirect location"
        return page
    if not (200 <= result.status < 300):
        return page
    page.body_kind = body_kind(result)
    if result.entry.kind != "page":
        # Fetched to be read for URLs; a site that answers with an HTML page instead is
        # parsed as one below.
        if page.body_kind not in PARSED_KINDS:
            page.links, page.parse_error, _kind = sitemap_links(result, max_sitemap_bytes)
            return page
    if page.body_kind not in PARSED_KINDS:
        return page
    # Parsed once (links, then text), no further than the parse limits allow.
    tree, page.parse_truncated, encoding, unparsed = parse_bounded(result.body, result.content_type)
    found = page_links(tree, result.url, token, encoding, unparsed, max_links)
    # As columns: the page is pickled into content seen's batch files and read back.
    page.links = html_link_columns(found.links)
    page.links_capped = found.capped
    if found.capped and page.parse_truncated is None:
        page.parse_truncated = "links"
    page.canonical = found.canonical
    page.title = found.title
    page.meta_noindex |= found.meta_noindex
    page.meta_nofollow |= found.meta_nofollow
    page.simhash = textfp.simhash_hex(textfp.tree_simhash(tree))
    return page


class _ParseFn(beam.DoFn):
    def __init__(self, token: str, max_sitemap_bytes: int, max_links: int = MAX_LINKS) -> None:
        self.token = token
        self.max_sitemap_bytes = max_sitemap_bytes
        self.max_links = max_links
        self.received = Metrics.counter("parse", "received")
        self.html = Metrics.counter("parse", "html_pages")
        self.links = Metrics.counter("parse", "links")
        self.error = Metrics.counter("parse", "error")
        self.sitemaps = Metrics.counter("parse", "sitemaps")  # sitemaps and feeds read
        self.listed = Metrics.counter("parse", "sitemap_links")  # URLs and child sitemaps they gave
        self.skipped: dict[str, Any] = {}  # parse/skipped_<kind>, made as kinds turn up
        self.truncated: dict[str, Any] = {}  # parse/truncated_<limit>, likewise
        # Pages whose links passed --max-links-per-page (the pages/ column says "links" for
        # those no other limit cut first).
        self.capped = Metrics.counter("parse", "truncated_links")
        self.dead = Outlet("parse")

    def setup(self) -> None:
        gctune.tune()  # this process moves many small objects per page (core/runtime/gctune.py)

    def finish_bundle(self) -> None:
        # The URL caches' entries, made all through the bundle (the local runners' is the
        # round's whole fetch), would keep most of the memory its pages used from going back
        # to the stages after it (urlnorm.clear_caches says how). A next bundle refills them
        # within a few pages.
        urlnorm.clear_caches()
        hostkeys.clear_caches()

    def process(self, result: FetchResult) -> Iterator[ParsedPage]:
        self.received.inc()
        try:
            self.dead.check(result)
            page = parse_fetch(result, self.token, self.max_sitemap_bytes, self.max_links)
        except Exception as exc:  # one hostile page must not fail the round
            # Set aside with its reason (its frontier row kept); the page still goes on to
            # be archived, with the error, and without links.
            yield self.dead.tagged(exc, result)
            self.error.inc()
            page = ParsedPage(fetch=result, parse_error=f"{type(exc).__name__}: {exc}"[:300])
        if page.links_capped:
            self.capped.inc()
        if page.parse_truncated is not None and page.parse_truncated != "links":  # parse/truncated_<limit>
            counter = self.truncated.get(page.parse_truncated)
            if counter is None:
                counter = Metrics.counter("parse", "truncated_" + page.parse_truncated)
                self.truncated[page.parse_truncated] = counter
            counter.inc()
        if page.links and page.body_kind in PARSED_KINDS:
            self.html.inc()
            self.links.inc(len(page.links))
        kind = page.body_kind
        if result.entry.kind != "page" and kind is not None and kind not in PARSED_KINDS:
            self.sitemaps.inc()
            self.listed.inc(len(page.links))
        elif kind is not None and kind not in PARSED_KINDS:
            counter = self.skipped.get(kind)
            if counter is None:
                counter = self.skipped[kind] = Metrics.counter("parse", skipped_counter_name(kind))
            counter.inc()
        yield page


class ParsePages(beam.PTransform):
    """``FetchResult`` → ``ParsedPage``, one for one.

    Governed by ``--max-sitemap-bytes`` (the largest sitemap or feed read) and
    ``--max-links-per-page`` (the most links an HTML page gives, the first in document order;
    a page with more is counted as ``parse/truncated_links``).
    """

    def __init__(self, token: str, max_sitemap_bytes: int = sitemaps.MAX_BYTES, max_links: int = MAX_LINKS) -> None:
        super().__init__()
        self.token = token
        self.max_sitemap_bytes = max_sitemap_bytes
        self.max_links = max_links

    def expand(self, results: beam.PCollection) -> beam.PCollection:
        out = results | "Parse HTML, sitemaps and feeds" >> beam.ParDo(
            _ParseFn(self.token, self.max_sitemap_bytes, self.max_links)
        ).with_outputs(ERRORS, main="pages")
        collect(out[ERRORS])
        return out.pages
