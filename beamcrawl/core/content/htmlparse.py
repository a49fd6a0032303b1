"""What a page says: links, canonical, meta robots, title, checksum. Pure functions.

selectolax's Lexbor parser is fast and tolerant of broken markup. Links are made absolute
against the document's ``<base href>`` (or the URL it was fetched from), normalised and
fingerprinted here, once per page, so that later stages carry a page's links as one element.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import mmh3
from selectolax.lexbor import LexborHTMLParser, LexborNode

from beamcrawl.core.content import htmlbounds
from beamcrawl.core.content.encodings import decode
from beamcrawl.core.content.sniff import decode_html, meta_tags
from beamcrawl.core.urls.urlnorm import InvalidURL, fingerprint, normalize

HTML_TYPES = ("text/html", "application/xhtml+xml")
FEED_TYPES = ("application/rss+xml", "application/atom+xml")
MAX_PARSE_BYTES = 4 * 1024 * 1024
MAX_ANCHOR_CHARS = 256
#: Links one page contributes, the first in document order (0: no cap). Far above any real page
#: the tests read (at most 359 on the HTML manuals of /usr/share/doc, 21 on simweb), and above
#: Heritrix's 6,000 outlinks; a page of 4 MiB of distinct links holds about 180,000.
MAX_LINKS = 10_000


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
    # Whether the page had more links than it may contribute: ``links`` are the first of them,
    # the others were not read.
    capped: bool = False


def _squeeze(text: str) -> str:
    """``text`` with each run of whitespace one space, none at the ends: what
    ``re.sub(r"\\s+", " ", text).strip()`` gives (``str.split()`` cuts at the same Unicode
    whitespace), for a third of the cost."""
    return " ".join(text.split())


# An anchor's text, as kept, is its subtree's text squeezed and cut to MAX_ANCHOR_CHARS: each
# node's text is summed up as it reads once each run of whitespace is one space (the same
# whitespace str.split cuts at), and only its first _ANCHOR_PREFIX characters, which decide
# that cut (one may be a space the squeeze drops at each end).
_ANCHOR_PREFIX = MAX_ANCHOR_CHARS + 2
# Characters the anchors of a page read one by one before they are read by one walk: more
# than a page's text holds (at most MAX_PARSE_BYTES characters), so only anchors that nest
# read that many.
_ANCHOR_READ = MAX_PARSE_BYTES
_WHITESPACE_RUN = re.compile(r"\s+")


def _anchor_texts(anchors: list[LexborNode]) -> dict[int, str]:
    """The anchor text of each node of ``anchors`` (by ``mem_id``), what
    ``_squeeze(node.text(deep=True))[:MAX_ANCHOR_CHARS]`` gives, when anchors nest.

    Read so, each anchor walked its whole subtree, and nested ones each walked the ones inside
    them again: 500 ``<a href>`` nested in an ``<svg>`` (or between ``<object>`` markers) around
    the words of a 2 MB page took 8.8 s (0.11 s here). Here each subtree is walked once, the first
    anchor that holds it summing up the anchors inside it on the way (in document order, an
    anchor comes before those it holds), so the walk reads each node at most once.
    """
    wanted = {node.mem_id for node in anchors}
    found: dict[int, str] = {}
    for anchor in anchors:
        if anchor.mem_id in found:
            continue
        # Post-order: a node's summary is its children's, joined; (node, children, summary).
        stack: list[tuple[LexborNode, Iterator[LexborNode], str]] = [(anchor, anchor.iter(include_text=True), "")]
        while stack:
            node, children, summary = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                if node.mem_id in wanted:
                    found[node.mem_id] = _squeeze(summary)[:MAX_ANCHOR_CHARS]
                if stack:
                    parent, siblings, before = stack[-1]
                    stack[-1] = (parent, siblings, _joined(before, summary))
                continue
            if child.is_text_node:
                if len(summary) < _ANCHOR_PREFIX:
                    stack[-1] = (node, children, _joined(summary, _summary(child.text_content or "")))
            elif len(summary) < _ANCHOR_PREFIX or child.mem_id in wanted:
                stack.append((child, child.iter(include_text=True), ""))
    return found


def _summary(text: str) -> str:
    """The first _ANCHOR_PREFIX characters of ``text`` with each run of whitespace one space."""
    return _WHITESPACE_RUN.sub(" ", text)[:_ANCHOR_PREFIX]


def _joined(summary: str, after: str) -> str:
    """The summary of a text that reads ``summary``'s text, then ``after``'s."""
    if len(summary) >= _ANCHOR_PREFIX or not after:
        return summary
    if summary.endswith(" ") and after.startswith(" "):
        after = after[1:]
    return (summary + after)[:_ANCHOR_PREFIX]


def checksum(payload: bytes) -> str:
    """16 hex digits of the payload's 64-bit mmh3 (the exact-duplicate key)."""
    return format(mmh3.hash64(payload, seed=0, signed=False)[0], "016x")


def is_html(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() in HTML_TYPES


# The directives the search engines document with a value after a colon (max-snippet:20,
# unavailable_after: 2030-01-01): any other ``name:`` that opens a directive names the agent
# the directives from there on are meant for (a name has a letter: the 15 of a date's
# "15:00:00" is none).
_VALUED_DIRECTIVES = frozenset({"max-snippet", "max-image-preview", "max-video-preview", "unavailable_after"})
_AGENT_PREFIX = re.compile(r"[ \t]*([A-Za-z0-9_.-]+)[ \t]*:(.*)", re.DOTALL)


def robots_directives(values: list[str], token: str) -> tuple[bool, bool]:
    """(noindex, nofollow) from meta robots / X-Robots-Tag values meant for us.

    A value is a list of directives, separated by commas (or spaces), case-insensitive. A
    directive may name the agent it and those after it are meant for (``"otherbot:
    noindex"``, ``"otherbot: noindex, beamcrawl: nofollow"``, the form two X-Robots-Tag
    field lines take when combined, RFC 9110 §5.3); those before any name, and those named
    for our token, count. ``none`` is ``noindex, nofollow``.
    """
    noindex = nofollow = False
    token = token.lower()
    for value in values:
        ours = True
        for item in value.split(","):
            named = _AGENT_PREFIX.match(item)
            if named is not None:
                name = named.group(1).lower()
                if name not in _VALUED_DIRECTIVES and any(c.isalpha() for c in name):
                    ours = name == token
                    item = named.group(2)
            if not ours:
                continue
            words = item.lower().split()
            if "none" in words:
                noindex = nofollow = True
            noindex |= "noindex" in words
            nofollow |= "nofollow" in words
    return noindex, nofollow


def parse_html(
    body: bytes, url: str, content_type: str = "", token: str = "beamcrawl", max_links: int = MAX_LINKS
) -> PageLinks:
    """Parses an HTML page into its links and directives.

    Args:
        body: the decoded payload (at most MAX_PARSE_BYTES are parsed).
        url: the URL the page was fetched from (the base unless ``<base href>`` says otherwise).
        content_type: the response's Content-Type (for the charset).
        token: our robots product token, for bot-scoped meta robots.
        max_links: the most links kept, the first in document order (0: all).
    """
    tree, _, encoding, unparsed = parse_bounded(body, content_type)
    return page_links(tree, url, token, encoding, unparsed, max_links)


def parse_document(body: bytes, content_type: str = "") -> LexborHTMLParser:
    """The Lexbor tree of an HTML payload (at most MAX_PARSE_BYTES of it), decoded by the
    WHATWG order (BOM, header, meta, UTF-8, detector, windows-1252) and labels: a page
    declaring a non-text codec (idna, base64, utf-7) must not lose its links or hide markup.
    Parsed no further than the limits of :mod:`beamcrawl.core.content.htmlbounds` allow.
    """
    return parse_bounded(body, content_type)[0]


class HtmlTree(NamedTuple):
    """A parsed HTML payload: the tree, the limit that cut the document (``elements``,
    ``depth``, ``attributes``, ``tags``; None when it was parsed whole), the codec it was
    decoded with (for its links' queries, :func:`beamcrawl.core.urls.urlnorm.normalize`) and
    the ``(name, content)`` of each ``<meta>`` in the part not parsed (:func:`unparsed_metas`)."""

    tree: LexborHTMLParser
    truncated: str | None
    encoding: str
    unparsed: tuple[tuple[str, str], ...] = ()


def parse_bounded(body: bytes, content_type: str = "") -> HtmlTree:
    """:func:`parse_document`, with what else the parse found out."""
    text, charset = decode_html(body[:MAX_PARSE_BYTES], content_type)
    bound = htmlbounds.scan(text)
    rest = body[MAX_PARSE_BYTES:]
    if bound is None:
        unparsed = unparsed_metas("", rest, charset.encoding) if rest else ()
        return HtmlTree(LexborHTMLParser(text), None, charset.encoding, unparsed)
    unparsed = unparsed_metas(text[bound.cut :], rest, charset.encoding)
    return HtmlTree(LexborHTMLParser(text[: bound.cut]), bound.reason, charset.encoding, unparsed)


def unparsed_metas(cut: str, rest: bytes, encoding: str) -> tuple[tuple[str, str], ...]:
    """The ``(name, content)`` of each named ``<meta>`` in the part of a document not parsed:
    ``cut``, the text past a parse limit, and ``rest``, the bytes past :data:`MAX_PARSE_BYTES`
    (decoded as the document is). A page's robots directives hold wherever it puts them: a
    ``nofollow`` past the cut asks that the links before it not be followed either."""
    found = []
    for text in (cut, decode(rest, encoding)):
        for attrs in meta_tags(text.encode("utf-8", "replace")):
            name, content = attrs.get(b"name"), attrs.get(b"content")
            if name and content is not None:
                found.append((name.decode("utf-8", "replace"), content.decode("utf-8", "replace")))
    return tuple(found)


# Everything page_links reads, in one selector: each css() call parses its selector and
# walks the whole document, and on a small page that costs more than what it finds. No
# element matches two of these (each names another tag), and css() answers in document order.
_LINK_SELECTOR = "a[href], area[href], link[rel][href], iframe[src], frame[src]"
_DIRECTIVE_SELECTOR = "base[href], meta[name], meta[http-equiv], title"
_PAGE_SELECTOR = _DIRECTIVE_SELECTOR + ", " + _LINK_SELECTOR
# The attributes each selector of _LINK_SELECTOR asks of its tag (and <meta http-equiv>, which may
# be a refresh), for :func:`_link_nodes` to read the same nodes one at a time.
_LINK_ATTRIBUTES = {
    "a": ("href",),
    "area": ("href",),
    "link": ("rel", "href"),
    "iframe": ("src",),
    "frame": ("src",),
    "meta": ("http-equiv",),
}
# The same by Lexbor's number of each name (a name's number is its own in every document and
# namespace, an SVG <a> an HTML one's): a node's number is read without making its name.
_LINK_TAG_IDS = {
    LexborHTMLParser(f"<frameset><{name}>" if name == "frame" else f"<{name}>").css(name)[0].tag_id: (name, wanted)
    for name, wanted in _LINK_ATTRIBUTES.items()
}
# How many times the cap a page's tags may be and its link elements still be found by one css()
# call: the nodes it makes past the cap are then at most three times the cap's (about 0.2 µs and
# 100 bytes each), and css() reads a page of few links among many tags at twice the walk's speed
# (nettle's 548 KB manual, 29,921 tags and 1,883 link elements: 2.3 ms against 4.5 ms).
_FOUND_AT_ONCE = 4
# An SVG or MathML element's xlink:href is an href to the selectors (its local name), not to
# an HTML element's: a node with only that one is asked the selector itself.
_XLINK_SELECTORS = {"a": "a[href]", "area": "area[href]", "link": "link[rel][href]"}
_SPACE = "\t\n\f\r "
_C0_OR_SPACE = "".join(map(chr, range(0x21)))


def refresh_target(content: str) -> str | None:
    """The URL of a ``<meta http-equiv=refresh content=...>`` (``"5; url='/next'"`` →
    ``"/next"``), read as the HTML standard's declarative refresh reads it; None when it names
    none (a plain reload) or the content is not a refresh."""
    rest = content.lstrip(_SPACE)
    i = 0
    while i < len(rest) and rest[i] in "0123456789":
        i += 1
    if i == 0 and not rest.startswith("."):
        return None
    while i < len(rest) and rest[i] in "0123456789.":
        i += 1
    rest = rest[i:]
    if not rest or rest[0] not in ";," + _SPACE:
        return None
    rest = rest.lstrip(_SPACE)
    if rest[:1] in (";", ","):
        rest = rest[1:].lstrip(_SPACE)
    if rest[:3].lower() == "url":
        after = rest[3:].lstrip(_SPACE)
        if after[:1] == "=":
            rest = after[1:].lstrip(_SPACE)
    if rest[:1] in ("'", '"'):
        quote, rest = rest[0], rest[1:]
        end = rest.find(quote)
        if end >= 0:
            rest = rest[:end]
    return rest.strip(_SPACE) or None


def _link_nodes(tree: LexborHTMLParser) -> Iterator[tuple[str, LexborNode]]:
    """``(tag, node)`` of each node ``css(_LINK_SELECTOR)`` matches and of each ``<meta
    http-equiv>``, in document order, one at a time: ``css()`` makes every match's node at once
    (a page of many links, the links past the cap too), a walk only the ones read."""
    if tree.root is None:
        return
    tag_ids = _LINK_TAG_IDS
    for node in tree.root.traverse():
        known = tag_ids.get(node.tag_id)
        if known is None:
            continue
        tag, wanted = known
        attrs = node.attrs  # asked by name, no dict of them made
        if all(name in attrs for name in wanted):
            if tag != "meta":
                yield tag, node
            elif (attrs.get("http-equiv") or "").strip().lower() == "refresh":
                yield "refresh", node
        elif tag in _XLINK_SELECTORS and "xlink:href" in attrs and node.css_matches(_XLINK_SELECTORS[tag]):
            yield tag, node


def page_links(
    tree: LexborHTMLParser,
    url: str,
    token: str = "beamcrawl",
    encoding: str | None = None,
    unparsed: tuple[tuple[str, str], ...] = (),
    max_links: int = MAX_LINKS,
) -> PageLinks:
    """:func:`parse_html` of a document already parsed (:func:`parse_document`); reads the
    tree without changing it. ``unparsed`` are the ``<meta>`` tags of the part of the
    document a parse limit left out (:attr:`HtmlTree.unparsed`): their robots directives
    count as the tree's do.

    Links are resolved as a browser resolves them: against the first ``<base href>``; an
    empty or fragment-only ``href`` is the base's document, kept when a ``<base>`` makes
    that another page (a link to the page itself adds nothing); the query of a link on a
    page that is not UTF-8 is written in the page's ``encoding``. A ``<meta
    http-equiv=refresh>`` target, which a browser follows, is a link of kind ``refresh``.

    At most ``max_links`` links are kept (0: all), the first in document order; the page is
    then marked :attr:`PageLinks.capped` and the link elements after the one that passed the
    cap are not read, so a page of many links costs what its first ``max_links`` cost. A
    target kept is followed if any of its links up to there may be (one after them that may
    is not read). The ``<base>``, meta robots and title are read from the whole document.
    """
    out = PageLinks()
    # A page of no more tags than _FOUND_AT_ONCE times the cap has its links found at once
    # (each link is a tag of its own: the copies of an <a> the parser makes are its link
    # again), the nodes past the cap made but not read. Past that, the link elements are read
    # one at a time, up to the one that passes the cap.
    # (Each tag is at least one byte: a page of no more bytes than that is not counted.)
    at_once = _FOUND_AT_ONCE * max_links
    raw = tree.raw_html
    walked = max_links > 0 and len(raw) > at_once and raw.count(b"<") > at_once
    most = max_links if max_links > 0 else -1  # -1: no length of out.links passes it

    base_node = title_node = None
    meta_nodes = []
    link_nodes = []
    for node in tree.css(_DIRECTIVE_SELECTOR if walked else _PAGE_SELECTOR):
        tag = node.tag or ""
        if tag == "base":
            if base_node is None:  # the first <base href> is the document's base
                base_node = node
        elif tag == "meta":
            meta_nodes.append(node)
            if not walked and (node.attributes.get("http-equiv") or "").strip().lower() == "refresh":
                link_nodes.append(("refresh", node))
        elif tag == "title":
            if title_node is None:
                title_node = node
        else:
            link_nodes.append((tag or "", node))

    base = url
    # A <base href> of another scheme (file:///C:/site/ on a page saved from a disk): browsers
    # resolve against it when they can parse it (the relative links are then that scheme's,
    # none to fetch), against the page's URL when they cannot. A link is kept only where both
    # readings agree, so that it is never a path on the page's host the page did not link.
    other_base: str | None = None
    if base_node is not None:
        href = (base_node.attributes.get("href") or "").strip(_C0_OR_SPACE)
        if href:
            try:
                base = normalize(href, url, encoding)
            except InvalidURL as exc:
                if str(exc).startswith("unsupported scheme"):
                    other_base = href

    metas = []
    named = [(node.attributes.get("name") or "", node.attributes.get("content") or "") for node in meta_nodes]
    for name, content in named + list(unparsed):
        name = name.strip().lower()
        if name in ("robots", token.lower()):
            metas.append(content if name == "robots" else f"{token}: {content}")
    out.meta_noindex, out.meta_nofollow = robots_directives(metas, token)

    if title_node is not None:
        out.title = _squeeze(title_node.text())[:512] or None

    # Anchors that do not nest read each character of the page's text once at most: past
    # that, anchors nest (an <svg>'s <a> do, as do <a> between <object> markers) and are read
    # by one walk (_anchor_texts). Asking the tree whether they nest first ("a[href] a[href]")
    # cost as much as finding the links.
    nested: dict[int, str] | None = None
    read = 0
    # Where the link elements are read one at a time, the ones after an anchor are not known
    # when it is read: the anchors are read once the links are found (_set_anchor_texts).
    anchors: list[tuple[int, LexborNode]] = []  # (index in out.links, node) of each <a> edge

    seen: dict[tuple[int, str], int] = {}  # each edge's index in out.links
    # A page often links one target several times (a picture and its caption, a menu at
    # the top and the bottom): each href is normalised and fingerprinted once.
    targets: dict[str, tuple[str, int] | None] = {}
    for tag, node in _link_nodes(tree) if walked else link_nodes:
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
        if kind == "refresh":
            href = refresh_target(attrs.get("content") or "") or ""
            if not href:  # a reload of the page itself
                continue
        else:
            href = attrs.get("src" if kind == "frame" else "href") or ""
        href = href.strip(_C0_OR_SPACE)  # as the URL parser strips it: a no-break space stays
        if not href or href[0] == "#":
            # The base's document (RFC 3986 §5.2.2, as browsers resolve it): the page itself
            # unless a <base> names another.
            if base == url:
                continue
            href = ""
        elif href.startswith(("javascript:", "mailto:", "tel:", "data:")):
            continue
        if href in targets:
            found = targets[href]
        else:
            try:
                target = normalize(href, base, encoding)
                if other_base is not None and normalize(href, other_base, encoding) != target:
                    raise InvalidURL("relative to a base of another scheme")
                found = targets[href] = (target, fingerprint(target))
            except InvalidURL:
                found = targets[href] = None
        if found is None:
            out.invalid_links += 1
            continue
        target, fp = found
        at = seen.get((fp, kind))
        if at is None and len(out.links) == most:  # one link more than the page may give
            out.capped = True
            break
        if kind == "canonical":
            out.canonical = target
        rel = attrs.get("rel")
        nofollow = rel is not None and "nofollow" in rel.lower().split()
        if at is not None:  # the same target twice on a page is one edge,
            if not nofollow and out.links[at][3]:  # followed if any of its links may be
                first, first_fp, first_anchor, _, first_kind = out.links[at]
                out.links[at] = (first, first_fp, first_anchor, False, first_kind)
            continue
        seen[(fp, kind)] = len(out.links)
        if kind != "a":
            anchor = ""
        elif walked:
            anchors.append((len(out.links), node))
            anchor = ""
        elif nested is not None:
            anchor = nested[node.mem_id]
        else:
            text = node.text(deep=True)
            read += len(text)
            if read > _ANCHOR_READ:  # more than any page's text: its anchors nest
                nested = _anchor_texts([n for t, n in link_nodes if t == "a"])
                anchor = nested[node.mem_id]
            else:
                anchor = _squeeze(text)[:MAX_ANCHOR_CHARS]
        out.links.append((target, fp, anchor, nofollow, kind))
    if anchors:
        _set_anchor_texts(out.links, anchors)
    return out


def _set_anchor_texts(links: list[tuple[str, int, str, bool, str]], anchors: list[tuple[int, LexborNode]]) -> None:
    """Writes into ``links`` the anchor text of each ``(index, node)`` of ``anchors`` (the
    first ``<a>`` of each ``a`` edge, in document order), read as :func:`page_links` reads
    them: one at a time until their text passes what a page's can be, then by one walk of the
    ones left (an anchor's text does not depend on which others are asked for)."""
    nested: dict[int, str] | None = None
    read = 0
    for i, (at, node) in enumerate(anchors):
        if nested is not None:
            anchor = nested[node.mem_id]
        else:
            text = node.text(deep=True)
            read += len(text)
            if read > _ANCHOR_READ:  # more than any page's text: its anchors nest
                nested = _anchor_texts([n for _, n in anchors[i:]])
                anchor = nested[node.mem_id]
            else:
                anchor = _squeeze(text)[:MAX_ANCHOR_CHARS]
        target, fp, _, nofollow, kind = links[at]
        links[at] = (target, fp, anchor, nofollow, kind)
