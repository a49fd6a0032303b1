"""Rendering of the change model's sitemaps and feeds (pure: values in, bytes out).

``site.py`` decides what a host lists and when each page last changed; this module only writes
the documents:

* :func:`sitemap_index` — a sitemaps.org 0.9 ``<sitemapindex>``;
* :func:`urlset` — a ``<urlset>`` with ``<loc>`` and ``<lastmod>``; :func:`gzipped` compresses
  one deterministically (no name, mtime 0), for the ``.xml.gz`` child;
* :func:`rss` — RSS 2.0 with ``<item><link>``, a permalink ``<guid>`` and an RFC 822
  ``<pubDate>``;
* :func:`atom` — Atom 1.0 with ``<entry><link rel="alternate">``, ``<id>`` and ``<updated>``.

Dates are written by :func:`~beamcrawl.simweb.changes.w3c_datetime` (sitemaps, Atom: UTC, to
the millisecond, truncated) and :func:`~beamcrawl.simweb.changes.http_date` (RSS: to the second,
rounded down). URLs are simweb URLs (plain ASCII, no ``&``), escaped anyway.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from xml.sax.saxutils import escape

from beamcrawl.simweb.changes import http_date, w3c_datetime

__all__ = ["atom", "gzipped", "rss", "sitemap_index", "urlset"]

_XML_DECL = '<?xml version="1.0" encoding="UTF-8"?>\n'
_SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def sitemap_index(children: Sequence[tuple[str, float]]) -> bytes:
    """A sitemap index listing ``(url, lastmod)`` children."""
    items = "".join(
        f"  <sitemap><loc>{escape(url)}</loc><lastmod>{w3c_datetime(t)}</lastmod></sitemap>\n" for url, t in children
    )
    return (f'{_XML_DECL}<sitemapindex xmlns="{_SITEMAP_NS}">\n{items}</sitemapindex>\n').encode()


def urlset(entries: Sequence[tuple[str, float]]) -> bytes:
    """A sitemap listing ``(url, lastmod)`` entries."""
    items = "".join(
        f"  <url><loc>{escape(url)}</loc><lastmod>{w3c_datetime(t)}</lastmod></url>\n" for url, t in entries
    )
    return (f'{_XML_DECL}<urlset xmlns="{_SITEMAP_NS}">\n{items}</urlset>\n').encode()


def gzipped(data: bytes) -> bytes:
    """``data`` gzip-compressed, byte-identical on every call (mtime 0, no file name)."""
    return gzip.compress(data, compresslevel=6, mtime=0)


def rss(title: str, site_url: str, items: Sequence[tuple[str, str, float]], built: float) -> bytes:
    """An RSS 2.0 feed.

    Args:
        title: The channel title.
        site_url: The site's root URL (the channel link).
        items: ``(url, title, last change)``, newest first.
        built: ``lastBuildDate`` (the serving time).
    """
    out = [
        _XML_DECL,
        '<rss version="2.0">\n<channel>\n',
        f"<title>{escape(title)}</title>\n<link>{escape(site_url)}</link>\n",
        f"<description>Recently updated pages of {escape(title)}</description>\n",
        f"<lastBuildDate>{http_date(built)}</lastBuildDate>\n",
    ]
    for url, item_title, t in items:
        out.append(
            f"<item><title>{escape(item_title)}</title><link>{escape(url)}</link>"
            f'<guid isPermaLink="true">{escape(url)}</guid><pubDate>{http_date(t)}</pubDate></item>\n'
        )
    out.append("</channel>\n</rss>\n")
    return "".join(out).encode()


def atom(title: str, site_url: str, feed_url: str, items: Sequence[tuple[str, str, float]], built: float) -> bytes:
    """An Atom 1.0 feed.

    Args:
        title: The feed title.
        site_url: The site's root URL.
        feed_url: The feed's own URL (its id and ``rel="self"`` link).
        items: ``(url, title, last change)``, newest first.
        built: The feed's ``updated`` (the serving time).
    """
    out = [
        _XML_DECL,
        '<feed xmlns="http://www.w3.org/2005/Atom">\n',
        f"<title>{escape(title)}</title>\n<id>{escape(feed_url)}</id>\n",
        f'<link rel="self" href="{escape(feed_url)}"/>\n<link rel="alternate" href="{escape(site_url)}"/>\n',
        f"<updated>{w3c_datetime(built)}</updated>\n<author><name>simweb</name></author>\n",
    ]
    for url, item_title, t in items:
        out.append(
            f'<entry><title>{escape(item_title)}</title><link rel="alternate" href="{escape(url)}"/>'
            f"<id>{escape(url)}</id><updated>{w3c_datetime(t)}</updated></entry>\n"
        )
    out.append("</feed>\n")
    return "".join(out).encode()
