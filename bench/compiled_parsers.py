"""Compiled parsers tried against ours (#25 Build item 5): resiliparse for the visible text,
can-ada and ada-url for resolving and normalising links.

    PYTHONPATH=. .venv/bin/python bench/compiled_parsers.py [--hosts 200] [--pages 1000]
        [--html-glob '/usr/share/doc/*/*.html'] [--hostile 2000] [--seed 3] [--repeat 3]
        [--parts text,urls] [--examples 1]

The same inputs go to both sides: simweb pages rendered from the model (no server), real HTML
documents written by people (``--html-glob``, as ``per_page_costs.py`` reads them; the tests
keep no saved real pages), and for URLs also the hostile grammar of ``tests/hostile_inputs.py``
and the WHATWG rows of ``tests/core/urls/test_urlnorm.py``.

Text. Ours is :func:`textfp.visible_text` (Lexbor through selectolax, the page chrome
removed, text nodes joined by spaces: :func:`textfp.tree_text` of a parse), then
:func:`textfp.text_simhash` (words, 2-word shingles, 64-bit simhash). Against it, resiliparse
in two ways, on the same decoded HTML:

* ``rp-main``: ``extract_plain_text(main_content=True)``, resiliparse's own chrome heuristics;
* ``rp-rules``: ``HTMLTree.parse``, our chrome rules applied to its DOM (the same selectors
  and class/id words, in Python as ours are), then ``extract_plain_text`` of that tree.

Both sides get the HTML decoded and cut where :mod:`htmlbounds` cuts it (both parsers are
Lexbor), as the crawler does once a page for its links and its text; the scan, and the parse
alone of each library, have rows of their own (in the crawler ours reuses the tree the links
were read from, so its text costs the crawler its row less the selectolax parse). For each,
µs a page (CPU, best of ``--repeat``), the share of pages whose :func:`textfp.tokens` are
identical to ours, and the Hamming distance between the two simhashes (0, 1-3, more than
:data:`textfp.MAX_DISTANCE` bits; a page where one side has too little text for a simhash is
counted apart), and the tokens each side has that the other has not.

URLs. Ours is :func:`urlnorm.normalize` (href, base, encoding), as ``htmlparse.page_links``
calls it per distinct href of a page (its caches cleared before each timed pass). Against
it, can-ada (``parse(base) + href``) and ada-url (``join_url``), each raw and with the two
cheap rules of ours applied after (fragment cut, schemes other than http(s) refused). For
each, µs a link, the share of links whose outputs are the same string (both refusing counts
as the same), and the differences by category, with examples.
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import random
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

import ada_url
import can_ada
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree
from selectolax.lexbor import LexborHTMLParser

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # hostile_inputs: the grammar every URL test draws from

from beamcrawl.core.content import htmlbounds, htmlparse, textfp  # noqa: E402
from beamcrawl.core.content.sniff import decode_html  # noqa: E402
from beamcrawl.core.urls import urlnorm  # noqa: E402
from beamcrawl.simweb.site import SimWeb  # noqa: E402

__all__ = ["main", "page_hrefs", "real_corpus", "simweb_corpus", "text_outputs", "text_rows", "url_outputs", "url_rows"]

HOSTILE_BASE = "http://base.example/a/b"


# --- text ------------------------------------------------------------------------------------


def _decoded(body: bytes) -> str:
    """The HTML decoded as the crawler decodes it (at most :data:`textfp.MAX_TEXT_BYTES`)."""
    return decode_html(body[: textfp.MAX_TEXT_BYTES], "")[0]


def _bounded(html: str) -> str:
    """``html`` cut where ours cuts it before parsing (resiliparse parses with Lexbor too, so
    the same element, depth and attribute limits protect it: notes/pitfalls.md)."""
    bound = htmlbounds.scan(html)
    return html if bound is None else html[: bound.cut]


def ours_text(html: str) -> str:
    """:func:`textfp.visible_text` of HTML already cut by :func:`_bounded` (the crawler scans
    a page once, for its links and its text), without scanning it again."""
    return textfp.tree_text(LexborHTMLParser(html))


def rp_main(html: str) -> str:
    return str(extract_plain_text(html, main_content=True, alt_texts=False, list_bullets=False))


def _rp_noise_named(node: Any) -> bool:
    return textfp._has_noise_word(node.getattr("class")) or textfp._has_noise_word(node.getattr("id"))


def rp_rules(html: str) -> str:
    """resiliparse's DOM with our chrome rules (:func:`textfp.tree_text`'s two passes), then its
    plain-text extraction of what is left."""
    tree = HTMLTree.parse(html)
    body = tree.body
    if body is None:
        return ""
    # query_selector_all on the body does not match the body itself (selectolax's css() does).
    # A slice makes the node list's wrappers in one go; iterating it (or indexing it) costs
    # time linear in the list per item (measured: 6.7 s for 1,446 nodes, a slice 3 ms).
    for node in reversed(body.query_selector_all(textfp._ALWAYS_NOISE)[:]):
        node.decompose()
    doomed = [
        node
        for node in body.query_selector_all("header, footer, [class], [id]")[:]
        if (node.tag in ("header", "footer") and not textfp._inside_content(node)) or _rp_noise_named(node)
    ]
    for node in reversed(doomed):
        node.decompose()
    return str(extract_plain_text(tree, alt_texts=False, list_bullets=False))


TEXT_SIDES: dict[str, Callable[[str], str]] = {"ours": ours_text, "rp-main": rp_main, "rp-rules": rp_rules}


class TextOutcome(NamedTuple):
    same_tokens: bool
    distance: int | None  # None: one side has no simhash (too little text); -1: neither has one
    only_ours: collections.Counter[str]
    only_theirs: collections.Counter[str]


def text_outputs(htmls: list[str], side: Callable[[str], str]) -> list[TextOutcome]:
    """Per page, how ``side``'s text compares with ours: tokens, simhash distance, surplus."""
    out = []
    for html in htmls:
        a, b = ours_text(html), side(html)
        ta, tb = textfp.tokens(a), textfp.tokens(b)
        ha, hb = textfp.text_simhash(a), textfp.text_simhash(b)
        if ha is None and hb is None:
            distance: int | None = -1
        elif ha is None or hb is None:
            distance = None
        else:
            distance = textfp.hamming(ha, hb)
        ca, cb = collections.Counter(ta), collections.Counter(tb)
        out.append(TextOutcome(ta == tb, distance, ca - cb, cb - ca))
    return out


def _per_item(
    items: list[Any], fn: Callable[[Any], Any], repeat: int, before: Callable[[], None] = lambda: None
) -> float:
    """Best of ``repeat`` CPU times of ``fn`` over ``items``, in µs per item (``before`` runs
    untimed ahead of each pass)."""
    best = float("inf")
    for _ in range(repeat):
        before()
        t0 = time.process_time()
        for x in items:
            fn(x)
        best = min(best, time.process_time() - t0)
    return 1e6 * best / max(1, len(items))


def text_rows(name: str, bodies: list[bytes], repeat: int, top: int = 8) -> list[str]:
    """Markdown lines: µs a page and agreement with ours for each side, on one corpus."""
    htmls = [_bounded(_decoded(b)) for b in bodies]
    lines = [
        f"\n### text, {name}: {len(htmls)} pages, {sum(map(len, htmls)) / max(1, len(htmls)):,.0f} chars each\n",
        "| side | text µs/page | text + simhash µs/page | identical tokens | simhash 0 bits | 1-3 bits | >3 bits | one side without simhash | neither |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    surplus = []
    for label, side in TEXT_SIDES.items():
        t_text = _per_item(htmls, side, repeat)
        t_all = _per_item(htmls, lambda h: textfp.text_simhash(side(h)), repeat)
        res = text_outputs(htmls, side)
        n = max(1, len(res))
        d = [r.distance for r in res]
        lines.append(
            f"| {label} | {t_text:,.1f} | {t_all:,.1f} | {sum(r.same_tokens for r in res) / n:.3f} "
            f"| {d.count(0) / n:.3f} | {sum(1 for x in d if x is not None and 1 <= x <= textfp.MAX_DISTANCE) / n:.3f} "
            f"| {sum(1 for x in d if x is not None and x > textfp.MAX_DISTANCE) / n:.3f} "
            f"| {d.count(None) / n:.3f} | {d.count(-1) / n:.3f} |"
        )
        if label != "ours":
            mine = sum((r.only_ours for r in res), collections.Counter())
            theirs = sum((r.only_theirs for r in res), collections.Counter())
            total = sum(len(textfp.tokens(ours_text(h))) for h in htmls)
            surplus.append(
                f"- {label}: tokens only ours {sum(mine.values()):,} of {total:,} "
                f"(top: {', '.join(f'{w} {c}' for w, c in mine.most_common(top))}); "
                f"only theirs {sum(theirs.values()):,} (top: {', '.join(f'{w} {c}' for w, c in theirs.most_common(top))})"
            )
    # The parse alone: in the crawler ours shares its tree with the links (htmlparse), so a
    # page's text costs the crawler the rows above less the selectolax parse.
    for label, fn in (
        ("selectolax parse alone", LexborHTMLParser),
        ("resiliparse parse alone", HTMLTree.parse),
        ("htmlbounds.scan (before either parse)", htmlbounds.scan),
    ):
        lines.append(f"| {label} | {_per_item(htmls, fn, repeat):,.1f} | | | | | | | |")
    return lines + [""] + surplus


# --- URLs ------------------------------------------------------------------------------------


class Link(NamedTuple):
    href: str
    base: str | None  # None: an absolute URL given alone
    encoding: str | None


def page_hrefs(body: bytes, url: str) -> list[Link]:
    """The hrefs of a page that ``htmlparse.page_links`` would normalise, each once, with the
    base and encoding it would pass (javascript:, mailto:, tel:, data: and same-document
    references skipped as it skips them)."""
    tree, _, encoding, _ = htmlparse.parse_bounded(body, "")
    base = url
    found = tree.css_first("base[href]")
    if found is not None:
        href = (found.attributes.get("href") or "").strip()
        if href:
            try:
                base = urlnorm.normalize(href, url, encoding)
            except urlnorm.InvalidURL:
                pass
    seen: dict[str, None] = {}
    for node in tree.css(htmlparse._LINK_SELECTOR + ", meta[http-equiv]"):
        attrs = node.attributes
        tag = node.tag
        if tag == "meta":
            if (attrs.get("http-equiv") or "").strip().lower() != "refresh":
                continue
            href = htmlparse.refresh_target(attrs.get("content") or "") or ""
        else:
            href = attrs.get("src" if tag in ("iframe", "frame") else "href") or ""
        href = href.strip()
        if not href or href[0] == "#":
            if base == url:
                continue
            href = ""
        elif href.startswith(("javascript:", "mailto:", "tel:", "data:")):
            continue
        seen.setdefault(href)
    return [Link(h, base, encoding) for h in seen]


def hostile_links(n: int, seed: int) -> list[Link]:
    """The hostile grammar's URLs against the base its test uses, and the WHATWG rows."""
    import hostile_inputs  # tests/: the grammar every URL test draws from

    sys.path.insert(0, str(REPO / "tests" / "core" / "urls"))
    import test_urlnorm

    out = [Link(u, HOSTILE_BASE, None) for u in hostile_inputs.hostile_urls(random.Random(seed), n)]
    return out + [Link(u, b, None) for u, b, _ in test_urlnorm.WHATWG_CASES]


def _clear_caches() -> None:
    for fn in (urlnorm._normalize_resolved, urlnorm._split_base, urlnorm._normalize_authority, urlnorm.normalize_host):
        fn.cache_clear()


def ours_url(link: Link) -> str | None:
    try:
        return urlnorm.normalize(link.href, link.base, link.encoding)
    except urlnorm.InvalidURL:
        return None


_CAN_BASES: dict[str, Any] = {}
# What a binding answers for a string it cannot be given at all (differs from ours, counted
# in a category of its own).
_NOT_TAKEN = "(not taken: lone surrogate)"


def can_ada_url(link: Link) -> str | None:
    try:
        if link.base is None:
            return str(can_ada.parse(link.href).href)
        base = _CAN_BASES.get(link.base)
        if base is None:
            base = _CAN_BASES[link.base] = can_ada.parse(link.base)
        return str((base + link.href).href)
    except ValueError:
        return None
    except TypeError:  # a lone surrogate (an undecodable byte): nanobind takes no such str
        return _NOT_TAKEN


def ada_url_url(link: Link) -> str | None:
    try:
        if link.base is None:
            return str(ada_url.URL(link.href).href)
        return str(ada_url.join_url(link.base, link.href))
    except UnicodeEncodeError:  # a lone surrogate (an undecodable byte): no UTF-8 for it
        return _NOT_TAKEN
    except ValueError:
        return None


def _our_cheap_rules(fn: Callable[[Link], str | None]) -> Callable[[Link], str | None]:
    """``fn`` with ours' two cheapest rules after it: the fragment cut, only http(s)."""

    def adjusted(link: Link) -> str | None:
        url = fn(link)
        if url is None or url == _NOT_TAKEN or not url.startswith(("http://", "https://")):
            return None
        return url.partition("#")[0]

    return adjusted


URL_SIDES: dict[str, Callable[[Link], str | None]] = {
    "ours (urlnorm.normalize)": ours_url,
    "can-ada": can_ada_url,
    "can-ada + fragment cut, http(s) only": _our_cheap_rules(can_ada_url),
    "ada-url": ada_url_url,
    "ada-url + fragment cut, http(s) only": _our_cheap_rules(ada_url_url),
}


def category(link: Link, ours: str | None, theirs: str | None) -> str:
    """Why two outputs differ, in a few words (the first difference found, host first)."""
    if theirs == _NOT_TAKEN:
        return f"it cannot take the string (a lone surrogate), we {'refuse' if ours is None else 'accept'}"
    if ours is None:
        reason = ""
        try:
            urlnorm.normalize(link.href, link.base, link.encoding)
        except urlnorm.InvalidURL as exc:
            reason = str(exc)
        if theirs is not None and not theirs.startswith(("http://", "https://")):
            return f"we refuse ({reason}), it gives a {theirs.partition(':')[0]}: URL"
        return f"we refuse ({reason}), it accepts"
    if theirs is None:
        return "it refuses, we accept"
    if "#" in theirs and theirs.partition("#")[0] == ours:
        return "fragment (we drop it)"
    a, b = urlsplit(ours), urlsplit(theirs.partition("#")[0])
    if a.netloc != b.netloc:
        if "@" in b.netloc:
            return "userinfo (we drop it)"
        if a.hostname == b.hostname:
            return "port (default or written otherwise)"
        if (b.hostname or "").endswith(".") and a.netloc == b.netloc.replace(".:", ":").rstrip("."):
            return "host: trailing dot (we remove it)"
        if not (b.hostname or "").isascii() or "xn--" in (a.hostname or "") + (b.hostname or ""):
            return "host: IDNA"
        if "%" in b.netloc:
            return "host: percent-encoded"
        return "host: other"
    if a.scheme != b.scheme:
        return "scheme"
    if a.path != b.path:
        if ";jsessionid" in b.path.lower():
            return "path: ;jsessionid= (we drop it)"
        if unquote(a.path) == unquote(b.path):
            return "path: percent-encoding (we write a stray % as %25, decode unreserved escapes, upper-case hex)"
        return "path: other"
    if a.query != b.query:
        if not a.query and b.query == "" and theirs.partition("#")[0].endswith("?"):
            return "query: empty '?' (we drop it)"
        if unquote(a.query) == unquote(b.query):
            return "query: percent-encoding (as in the path)"
        if len(a.query) < len(b.query) and urlnorm._MAYBE_DROPPED(b.query):
            return "query: tracking or session parameters (we drop them)"
        if link.encoding and not link.href.isascii():
            return "query: document encoding (ours writes it in the page's charset)"
        return "query: other"
    if theirs.partition("#")[0].endswith("?") and not ours.endswith("?"):
        return "query: empty '?' (we drop it)"
    return "other"


def url_outputs(links: list[Link], side: Callable[[Link], str | None]) -> list[tuple[Link, str | None, str | None]]:
    """Per link: the link, our output, ``side``'s output (None: refused)."""
    _CAN_BASES.clear()
    return [(link, ours_url(link), side(link)) for link in links]


def url_rows(name: str, links: list[Link], repeat: int, examples: int = 2) -> list[str]:
    """Markdown lines: µs a link and agreement with ours for each side, on one corpus."""
    lines = [
        f"\n### URLs, {name}: {len(links):,} links\n",
        "| side | µs/link | identical to ours | both refuse | different |",
        "|---|---:|---:|---:|---:|",
    ]
    details = []
    for label, side in URL_SIDES.items():

        def before() -> None:
            _clear_caches()
            _CAN_BASES.clear()

        us = _per_item(links, side, repeat, before)
        res = url_outputs(links, side)
        n = max(1, len(res))
        same = [r for r in res if r[1] == r[2]]
        both_none = sum(1 for r in same if r[1] is None)
        lines.append(f"| {label} | {us:,.2f} | {len(same) / n:.4f} | {both_none / n:.4f} | {n - len(same):,} |")
        if label.startswith("ours"):
            continue
        cats: dict[str, list[tuple[Link, str | None, str | None]]] = collections.defaultdict(list)
        for r in res:
            if r[1] != r[2]:
                cats[category(*r)].append(r)
        if not cats:
            continue
        ranked = sorted(cats.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        if "+" not in label:  # the raw output: the counts only (the examples come with the adjusted one)
            details.append(f"\n{label}, differences ({name}): " + "; ".join(f"{c} {len(r):,}" for c, r in ranked))
            continue
        details.append(f"\n{label}, differences by category ({name}):\n")
        for cat, rows in ranked:
            shown = "; ".join(f"`{link.href[:70]!r}` → ours `{o}`, it `{t}`" for link, o, t in rows[:examples])
            details.append(f"- {cat}: {len(rows):,} ({len(rows) / n:.4f}). {shown}")
    return lines + details


class Page(NamedTuple):
    url: str
    body: bytes


def simweb_corpus(hosts: int, pages: int, seed: int) -> list[Page]:
    """``pages`` simweb HTML pages (200s only) over ``hosts`` hosts, rendered without a server,
    as ``per_page_costs.simweb_pages`` picks them, with their URLs."""
    web = SimWeb(hosts, seed=seed, pages_per_host=1_000_000, port=8000, latency_scale=0)
    out: list[Page] = []
    j = 1
    while len(out) < pages:
        for hi in range(hosts):
            path = web.page_path(hi, j)
            if path.endswith(".html"):
                sim = web.respond(web.names[hi], path)
                if sim.status == 200:
                    out.append(Page(f"http://{web.names[hi]}:8000{path}", sim.body))
            if len(out) >= pages:
                break
        j += 1
    return out


def real_corpus(pattern: str) -> list[Page]:
    """The HTML files matching ``pattern``, each under an http URL made of its folder and name."""
    out = []
    for path in sorted(p for p in glob.glob(pattern) if os.path.isfile(p)):
        out.append(Page(f"http://docs.example/{'/'.join(Path(path).parts[-2:])}", Path(path).read_bytes()))
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the figures as Markdown tables."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=200)
    p.add_argument("--pages", type=int, default=1000, help="simweb pages")
    p.add_argument("--html-glob", default="/usr/share/doc/*/*.html", help="real HTML documents ('' for none)")
    p.add_argument("--hostile", type=int, default=2000, help="URLs drawn from the hostile grammar (0: none)")
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--parts", default="text,urls")
    p.add_argument("--examples", type=int, default=1, help="examples per category of URL difference")
    args = p.parse_args(argv)
    parts = set(args.parts.split(","))

    corpora = [("simweb", simweb_corpus(args.hosts, args.pages, args.seed))]
    if args.html_glob:
        corpora.append(("real HTML", real_corpus(args.html_glob)))
    print(
        f"resiliparse {version('resiliparse')}, can-ada {version('can_ada')}, ada-url {version('ada-url')}; "
        + ", ".join(f"{name}: {len(pages)} pages" for name, pages in corpora)
        + (f" ({args.html_glob})" if args.html_glob else "")
    )
    if "text" in parts:
        for name, pages in corpora:
            if pages:
                print("\n".join(text_rows(name, [page.body for page in pages], args.repeat)))
    if "urls" in parts:
        for name, pages in corpora:
            links = [link for page in pages for link in page_hrefs(page.body, page.url)]
            if links:
                print("\n".join(url_rows(f"{name} links", links, args.repeat, args.examples)))
        if args.hostile:
            links = hostile_links(args.hostile, args.seed)
            print("\n".join(url_rows("hostile URLs and WHATWG rows", links, args.repeat, args.examples)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
