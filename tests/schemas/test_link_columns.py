"""A page's links as columns (``LinkColumns``): the same links as the list of ``Link`` it
stands for, whichever way they are read, and every stage that reads links in bulk gives
the same for either form."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.urls.hostkeys import domain_of
from beamcrawl.core.urls.urlnorm import fingerprint, host_of, normalize
from beamcrawl.core.urls.urlshape import ShapeRules
from beamcrawl.schemas.arrow import signed64, timestamp_ms
from beamcrawl.schemas.records import (
    FetchResult,
    FrontierEntry,
    Link,
    LinkColumns,
    PageBatch,
    ParsedPage,
    first_url,
    follow_rows,
)
from beamcrawl.transforms.budgets import linked_domains
from beamcrawl.transforms.parquet_io import link_edge_columns
from beamcrawl.transforms.parse import html_link_columns, link_host, parse_fetch
from beamcrawl.transforms.url_seen import page_offers

KINDS = ("a", "canonical", "redirect", "area", "frame", "feed", "refresh", "sitemap", "listed")
HOSTS = ("a.example", "b.example", "news.example.co.uk:8080", "10.0.0.1", "[::1]:8080", "xn--bcher-kva.example")
PATHS = ("", "x", "a/b", "a/b/a/b/a/b/", "f.zip", "sitemap.xml.gz", "p?q=1", "~%20", "deep/" * 20)


@st.composite
def links(draw: st.DrawFn, dated: bool = True) -> Link:
    url = normalize(f"http://{draw(st.sampled_from(HOSTS))}/{draw(st.sampled_from(PATHS))}")
    return Link(
        url=url,
        fp=draw(st.one_of(st.just(fingerprint(url)), st.integers(0, (1 << 64) - 1))),
        anchor=draw(st.text(max_size=12)),
        nofollow=draw(st.booleans()),
        kind=draw(st.sampled_from(KINDS)),
        lastmod=draw(st.one_of(st.none(), st.floats(0, 2e9))) if dated else None,
        # "": not found where parsed (each reader then finds it itself)
        host=draw(st.sampled_from(("", link_host(url)))),
    )


link_lists = st.lists(links(), max_size=30)


def _page(found: list[Link] | LinkColumns, meta_nofollow: bool = False, depth: int = 2) -> ParsedPage:
    src = FrontierEntry(url="http://a.example/p", fp=1, host="a.example", due_ms=0, depth=depth)
    f = FetchResult(entry=src, outcome="fetched", url=src.url, status=200, fetched_at=1_767_225_600.5)
    return ParsedPage(fetch=f, links=found, meta_nofollow=meta_nofollow)


@settings(max_examples=200, deadline=None)
@given(link_lists)
def test_columns_are_the_links_they_were_made_of(found: list[Link]) -> None:
    cols = LinkColumns.of(found)
    assert list(cols) == found and cols == found and found == cols
    assert len(cols) == len(found) and bool(cols) == bool(found)
    for i in range(-len(found), len(found)):
        assert cols[i] == found[i]
    assert cols[1:-1] == found[1:-1] and isinstance(cols[1:-1], LinkColumns)
    with pytest.raises(IndexError):
        cols[len(found)]
    again = pickle.loads(pickle.dumps(cols, pickle.HIGHEST_PROTOCOL))
    assert type(again) is LinkColumns and again == cols and list(again) == found
    assert (cols.lastmods is None) == all(link.lastmod is None for link in found)
    if found:
        assert cols != found[:-1] and cols != LinkColumns.of(found[:-1])


@settings(max_examples=200, deadline=None)
@given(link_lists, st.booleans())
def test_readers_get_the_same_from_either_form(found: list[Link], meta_nofollow: bool) -> None:
    """What the candidates, the link edges, the linking domains and the redirect lookup read
    is the same for the list and for its columns (the columns' paths are separate code)."""
    cols = LinkColumns.of(found)
    assert list(follow_rows(cols, meta_nofollow)) == list(follow_rows(found, meta_nofollow))
    expected = [] if meta_nofollow else [(k.url, k.fp, k.kind, k.host, k.lastmod) for k in found if not k.nofollow]
    assert list(follow_rows(found, meta_nofollow)) == expected
    for kind in KINDS:
        assert first_url(cols, kind) == first_url(found, kind) == next((k.url for k in found if k.kind == kind), None)
    as_list, as_cols = _page(found, meta_nofollow), _page(cols, meta_nofollow)
    assert link_edge_columns(as_cols) == link_edge_columns(as_list) == _edges_by_link(as_list)
    assert linked_domains(as_cols) == linked_domains(as_list)
    for shape in (None, ShapeRules()):
        refused_list: dict[str, int] = {}
        refused_cols: dict[str, int] = {}
        offers = page_offers(as_list, shape, refused_list)
        assert page_offers(as_cols, shape, refused_cols) == offers
        assert refused_cols == refused_list


def _edges_by_link(page: ParsedPage) -> dict[str, list[object]] | None:
    """The link-edge columns made link by link (the rule as written before the columns)."""
    if not page.links:
        return None
    f = page.fetch
    n = len(page.links)
    dst_host = [link.host or host_of(link.url) for link in page.links]
    return {
        "src": [f.url] * n,
        "dst": [link.url for link in page.links],
        "src_fp": [signed64(f.entry.fp)] * n,
        "dst_fp": [signed64(link.fp) for link in page.links],
        "src_host": [f.entry.host] * n,
        "dst_host": dst_host,
        "src_domain": [domain_of(f.entry.host)] * n,
        "dst_domain": [domain_of(host) for host in dst_host],
        "anchor": [link.anchor or None for link in page.links],
        "nofollow": [link.nofollow or page.meta_nofollow for link in page.links],
        "kind": [link.kind for link in page.links],
        "fetched_at": [timestamp_ms(f.fetched_at)] * n,
    }


def test_the_edge_columns_follow_the_page_not_the_link() -> None:
    """A meta-nofollow page's edges are all nofollow; a link without its host found gets it."""
    found = [
        Link(url="http://b.example/x", fp=5, anchor="", nofollow=False, host=""),
        Link(url="http://c.example/y", fp=1 << 63, anchor="y", nofollow=True, host="c.example"),
    ]
    edges = link_edge_columns(_page(LinkColumns.of(found), meta_nofollow=True))
    assert edges is not None
    assert edges["nofollow"] == [True, True]
    assert edges["dst_host"] == ["b.example", "c.example"]
    assert edges["anchor"] == [None, "y"]
    assert edges["dst_fp"] == [5, -(1 << 63)]
    assert link_edge_columns(_page(LinkColumns.of([]))) is None


def test_columns_of_unequal_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="lengths"):
        LinkColumns(["u"], [1, 2], [""], [False], ["a"])
    with pytest.raises(ValueError, match="lengths"):
        LinkColumns(["u"], [1], [""], [False], ["a"], [None, None])
    assert LinkColumns(["u"], [1], [""], [False], ["a"]) == [Link(url="u", fp=1)]


def test_an_html_page_keeps_its_links_as_columns() -> None:
    """The parse gives an HTML page's links as columns, each link's host found once; a page
    pickled (as into content seen's batch files) comes back with the same links."""
    body = b'<html><body><a href="/x">X</a><a rel="nofollow" href="http://b.example/y">Y</a></body></html>'
    entry = FrontierEntry(url="http://a.example/", fp=fingerprint("http://a.example/"), host="a.example", due_ms=0)
    result = FetchResult(
        entry=entry,
        outcome="fetched",
        url=entry.url,
        final_url=entry.url,
        status=200,
        response_headers=[("Content-Type", "text/html")],
        raw_body=body,
        body=body,
    )
    page = parse_fetch(result, "beamcrawl")
    assert isinstance(page.links, LinkColumns)
    assert [(k.url, k.anchor, k.nofollow, k.host) for k in page.links] == [
        ("http://a.example/x", "X", False, "a.example"),
        ("http://b.example/y", "Y", True, "b.example"),
    ]
    assert page.links.fps == [fingerprint("http://a.example/x"), fingerprint("http://b.example/y")]
    (back,) = pickle.loads(pickle.dumps(PageBatch([page]), pickle.HIGHEST_PROTOCOL)).pages
    assert back == page and isinstance(back.links, LinkColumns)
    assert html_link_columns([]) == [] and not html_link_columns([])
