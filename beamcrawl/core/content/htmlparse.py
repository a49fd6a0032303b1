"""What a page says: links, canonical, meta robots, title, checksum. Pure functions.

selectolax's Lexbor parser is fast and tolerant of broken markup. Links are made absolute
against the document's ``<base href>`` (or the URL it was fetched from), normalised and
fingerprinted here, once per page, so that later stages carry a page's links as one element.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mmh3
from selectolax.lexbor import LexborHTMLParser

from beamcrawl.core.content.sniff import decode_html
from beamcrawl.core.urls.urlnorm import InvalidURL, fingerprint, normalize

HTML_TYPES = ("text/html", "application/xhtml+xml")
FEED_TYPES = ("application/rss+xml", "application/atom+xml")
MAX_PARSE_BYTES = 4 * 1024 * 1024
MAX_ANCHOR_CHARS = 256


@dataclass
class PageLinks:
    """Links and directives found in one HTML document."""

    links: list[tuple[str, int, str, bool, str]] = field(default_factory=list)
    # (normalised url, fingerprint, anchor text, nofollow, kind)
    canonical: str | None = None
    meta_nofollow: bool = False
    meta_noindex: bool = False
    title: str | None = None
    invalid_links: int = 0


def _squeeze(text: str) -> str:
    """``text`` with each run of whitespace one space, none at the ends: what
    ``re.sub(r"\\s+", " ", text).strip()`` gives (``str.split()`` cuts at the same Unicode
    whitespace), for a third of the cost."""
    return " ".join(text.split())


def checksum(payload: bytes) -> str:
    """16 hex digits of the payload's 64-bit mmh3 (the exact-duplicate key)."""
    return format(mmh3.hash64(payload, seed=0, signed=False)[0], "016x")


def is_html(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() in HTML_TYPES


def robots_directives(values: list[str], token: str) -> tuple[bool, bool]:
    """(noindex, nofollow) from meta robots / X-Robots-Tag values meant for us.

    A value may be scoped to a bot (``"otherbot: noindex"``); only generic values and those
    for our token count.
    """
    noindex = nofollow = False
    token = token.lower()
    for value in values:
        scope, _, rest = value.partition(":")
        if rest and " " not in scope.strip() and scope.strip().lower() not in ("unavailable_after",):
            if scope.strip().lower() != token:
                continue
            value = rest
        words = {w.strip().lower() for w in value.split(",")}
        if "none" in words:
            noindex = nofollow = True
        noindex |= "noindex" in words
        nofollow |= "nofollow" in words
    return noindex, nofollow


def parse_html(body: bytes, url: str, content_type: str = "", token: str = "beamcrawl") -> PageLinks:
    """Parses an HTML page into its links and directives.

    Args:
        body: the decoded payload (at most MAX_PARSE_BYTES are parsed).
        url: the URL the page was fetched from (the base unless ``<base href>`` says otherwise).
        content_type: the response's Content-Type (for the charset).
        token: our robots product token, for bot-scoped meta robots.
    """
    return page_links(parse_document(body, content_type), url, token)


def parse_document(body: bytes, content_type: str = "") -> LexborHTMLParser:
    """The Lexbor tree of an HTML payload (at most MAX_PARSE_BYTES of it), decoded by the
    WHATWG order (BOM, header, meta, UTF-8, detector, windows-1252) and labels: a page
    declaring a non-text codec (idna, base64, utf-7) must not lose its links or hide markup.
    """
    text, _ = decode_html(body[:MAX_PARSE_BYTES], content_type)
    return LexborHTMLParser(text)


# Everything page_links reads, in one selector: each css() call parses its selector and
# walks the whole document, and on a small page that costs more than what it finds. No
# element matches two of these (each names another tag), and css() answers in document order.
_LINK_SELECTOR = "a[href], area[href], link[rel][href], iframe[src], frame[src]"
_PAGE_SELECTOR = "base[href], meta[name], title, " + _LINK_SELECTOR


def page_links(tree: LexborHTMLParser, url: str, token: str = "beamcrawl") -> PageLinks:
    """:func:`parse_html` of a document already parsed (:func:`parse_document`); reads the
    tree without changing it."""
    out = PageLinks()

    base_node = title_node = None
    meta_nodes = []
    link_nodes = []
    for node in tree.css(_PAGE_SELECTOR):
        tag = node.tag or ""
        if tag == "base":
            if base_node is None:  # the first <base href> is the document's base
                base_node = node
        elif tag == "meta":
            meta_nodes.append(node)
        elif tag == "title":
            if title_node is None:
                title_node = node
        else:
            link_nodes.append((tag, node))

    base = url
    if base_node is not None:
        href = (base_node.attributes.get("href") or "").strip()
        if href:
            try:
                base = normalize(href, url)
            except InvalidURL:
                pass

    metas = []
    for node in meta_nodes:
        name = (node.attributes.get("name") or "").strip().lower()
        if name in ("robots", token.lower()):
            content = node.attributes.get("content") or ""
            metas.append(content if name == "robots" else f"{token}: {content}")
    out.meta_noindex, out.meta_nofollow = robots_directives(metas, token)

    if title_node is not None:
        out.title = _squeeze(title_node.text())[:512] or None

    seen: set[tuple[int, str]] = set()
    # A page often links one target several times (a picture and its caption, a menu at
    # the top and the bottom): each href is normalised and fingerprinted once.
    targets: dict[str, tuple[str, int] | None] = {}
    for tag, node in link_nodes:
        attrs = node.attributes
        if tag == "link":
            rels = (attrs.get("rel") or "").lower().split()
            if "canonical" in rels:
                kind = "canonical"
            elif "alternate" in rels and (attrs.get("type") or "").strip().lower() in FEED_TYPES:
                kind = "feed"  # the site's RSS or Atom feed: read for URLs, like a sitemap
            else:
                continue
        elif tag in ("iframe", "frame"):
            kind = "frame"
        else:
            kind = tag
        href = attrs.get("src" if kind == "frame" else "href") or ""
        href = href.strip()
        if not href or href.startswith(("#", "javascript:", "mailto:", "tel:", "data:")):
            continue
        if href in targets:
            found = targets[href]
        else:
            try:
                target = normalize(href, base)
                found = targets[href] = (target, fingerprint(target))
            except InvalidURL:
                found = targets[href] = None
        if found is None:
            out.invalid_links += 1
            continue
        target, fp = found
        if kind == "canonical":
            out.canonical = target
        if (fp, kind) in seen:  # the same target twice on a page is one edge
            continue
        seen.add((fp, kind))
        rel = attrs.get("rel")
        nofollow = rel is not None and "nofollow" in rel.lower().split()
        anchor = _squeeze(node.text(deep=True))[:MAX_ANCHOR_CHARS] if kind == "a" else ""
        out.links.append((target, fp, anchor, nofollow, kind))
    return out
