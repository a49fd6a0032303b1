"""The per-page Python of the archive and the text fingerprint, in µs per call (issue #25).

Times, with the process CPU clock and the best of ``--repeat`` runs (the machine is shared),
the small functions every fetched page goes through, on simweb pages rendered from the
model (no server) and on real HTML documents found on this machine (``--html-glob``):

* ``digest``: a WARC digest field, ``sha1:`` + base 32 of a 20-byte SHA-1
  (:func:`warc_revisit.payload_digest`, which the block digest of every record shares);
* ``record``: one response record, uncompressed (:func:`warc_records.record`);
* ``gzip L``: that record as one gzip member at levels 1, 3, 6 and 9
  (:func:`warc_records.gzip_member`), µs and bytes per page, and the level in use; then the
  level in use with the standard ``zlib`` and a whole 32 KiB window, as before zlib-ng;
* ``text``: the visible text of a parsed page (:func:`textfp.tree_text`), parse included;
* ``simhash``: the fingerprint of that text (:func:`textfp.text_simhash`);
* ``bounds``: the pre-scan of the parse limits (:func:`htmlbounds.scan`) of a decoded page, on
  simweb, on the real documents (mean and median a page: one 548 KB manual weighs on the mean)
  and on the hostile shapes the limits are for (best of three times ``--repeat`` runs); on
  simweb and the real documents also with the tags read by the regular expressions instead of
  the compiled tokenizer (``_htmltags.c``) and walked in Python instead of by the compiled walk
  (``_htmltags.walk``), and on the real documents and the hostile shapes with the compiled
  tags walked in Python, in the same run;
* ``surt``: the CDXJ key of every link of those pages (:func:`surt_key.surt_key`, the short way
  where it answers) against ``surt.surt`` alone, and the share the short way answers;
* ``shape``: the URL-shape check of every link of those pages (:meth:`urlshape.ShapeRules.check`,
  compiled where it was built) against the Python rules (``check_python``), and how many
  answers differ;
* ``norm``: ``urlnorm.normalize`` of every ``<a href>`` of the documents against a page's URL,
  its caches emptied before each pass (the compiled steps where they were built), against the
  Python steps alone (``normalize_python``), the share the compiled steps answer, and how many
  answers differ;
* ``schedule``: the revisit schedule of a page (:func:`freshness.schedule_page`) whose response
  carries ``Date`` and ``Last-Modified``, then with the two rows that hold its revisit state
  (``record.url_state_cells``, ``record.requeue_line``), and the HTTP-date reading inside it.

    python bench/per_page_costs.py [--hosts 200] [--pages 2000] [--repeat 5]
        [--html-glob '/usr/share/doc/*/*.html'] [--steps digest,gzip,text,bounds,links,surt,shape,norm,schedule] [--profile simhash|text|bounds]

``--profile`` runs cProfile over one pass of that step on the simweb sample (``bounds``: on the
real documents) and prints the top functions by own time. ``--passes N`` only runs ``text_simhash`` N times over the sample's
texts, untimed, for an instruction count that the machine's load does not blur::

    PYTHONHASHSEED=0 valgrind --tool=callgrind python bench/per_page_costs.py --pages 300 --passes 1
    (the same with --passes 2; the difference of the two totals / 300 is a page's instructions)
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import email.utils
import glob
import hashlib
import os
import pstats
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

from selectolax.lexbor import LexborHTMLParser

import surt

from beamcrawl.core.archive import surt_key, warc_records, warc_revisit
from beamcrawl.core.content import htmlbounds, htmlparse, textfp
from beamcrawl.core.net import conditional
from beamcrawl.core.policy.change_rate import SchedulePolicy
from beamcrawl.core.urls import urlnorm, urlshape
from beamcrawl.transforms import freshness, record
from beamcrawl.transforms.parse import parse_fetch
from beamcrawl.simweb.site import SimWeb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from stage_costs import sample_results  # noqa: E402

__all__ = ["main", "real_pages", "simweb_pages"]

LEVELS = (1, 3, 6, 9)
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 0\r\n"
    b"Date: Tue, 01 Dec 2026 19:00:00 GMT\r\nServer: simweb\r\n\r\n"
)
FIELDS = [
    ("WARC-Type", "response"),
    ("WARC-Record-ID", "<urn:uuid:0b8f4a3c-2d1e-4f5a-9b6c-7d8e9f0a1b2c>"),
    ("WARC-Date", "2026-12-01T19:00:00.123456Z"),
    ("WARC-Target-URI", "http://h17.simweb.test:8000/p/17/intro-to-things.html"),
    ("WARC-IP-Address", "127.0.0.1"),
    ("WARC-Payload-Digest", "sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
]


def simweb_pages(hosts: int, pages: int, seed: int = 3) -> list[bytes]:
    """``pages`` HTML bodies of simweb pages, spread over ``hosts`` hosts (200s only)."""
    web = SimWeb(hosts, seed=seed, pages_per_host=1_000_000, port=8000, latency_scale=0)
    out: list[bytes] = []
    j = 1
    while len(out) < pages:
        for hi in range(hosts):
            path = web.page_path(hi, j)
            if path.endswith(".html"):
                sim = web.respond(web.names[hi], path)
                if sim.status == 200:
                    out.append(sim.body)
            if len(out) >= pages:
                break
        j += 1
    return out


def real_pages(pattern: str) -> list[bytes]:
    """The HTML files matching ``pattern`` (documents written by people, not by simweb)."""
    out = []
    for path in sorted(p for p in glob.glob(pattern) if os.path.isfile(p)):
        with open(path, "rb") as fh:
            out.append(fh.read())
    return out


def _per_call(items: list[Any], fn: Callable[[Any], Any], repeat: int) -> float:
    """Best of ``repeat`` CPU times of ``fn`` over ``items``, in µs per item."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for x in items:
            fn(x)
        best = min(best, time.process_time() - t0)
    return 1e6 * best / len(items)


# The shapes that made one page cost gigabytes or minutes before the limits
# (tests/core/content/test_htmlbounds.py), each cut by the scan.
HOSTILE = {
    "<p><font id=N>x x 4,000": lambda: "".join(f"<p><font id={i}>x" for i in range(4000)),
    "<div> x 100,000": lambda: "<div>" * 100_000,
    "<ul><li> x 100,000": lambda: "<ul><li>" * 100_000,
    "one tag of 100,000 attributes": lambda: "<a " + " ".join(f"a{i}=x" for i in range(100_000)) + ">y</a>",
    "<table><tr><td><b id=1> x 10,000": lambda: "<table><tr><td><b id=1>" * 10_000,
    "<b><div>x x 10,000 + </b> x 10,000": lambda: "<b><div>x" * 10_000 + "</b>" * 10_000,
    "<a b> x 400,000": lambda: "<a b>" * 400_000,
}


@contextlib.contextmanager
def _tags_by_expressions() -> Iterator[None]:
    """The scan with its tags read, and a cut's tag found, by the regular expressions, as
    without the compiled tokenizer (``_htmltags.c``)."""
    held = htmlbounds._tags, htmlbounds._long_attributes, htmlbounds._offset_of_tag
    htmlbounds._tags, htmlbounds._long_attributes = htmlbounds._regex_tags, htmlbounds._regex_long_attributes
    htmlbounds._offset_of_tag = htmlbounds._regex_offset_of_tag
    try:
        yield
    finally:
        htmlbounds._tags, htmlbounds._long_attributes, htmlbounds._offset_of_tag = held


@contextlib.contextmanager
def _walk_in_python() -> Iterator[None]:
    """The scan with its tags walked in Python (:func:`htmlbounds._py_walk`), as without the
    compiled walk (``_htmltags.walk``)."""
    held = htmlbounds._walk
    htmlbounds._walk = htmlbounds._py_walk
    try:
        yield
    finally:
        htmlbounds._walk = held


def _bounds_rows(pages: list[bytes], real: list[bytes], repeat: int) -> list[str]:
    texts = [b.decode("utf-8", "replace") for b in pages]
    how = "compiled tags" if htmlbounds.COMPILED else "tags by expressions (no compiled tokenizer)"
    how += ", compiled walk" if htmlbounds.WALK_COMPILED else ", walk in Python (no compiled walk)"
    rows = [f"| bounds: htmlbounds.scan, simweb ({how}) | {_per_call(texts, htmlbounds.scan, repeat):,.1f} | |"]
    with _tags_by_expressions(), _walk_in_python():
        rows.append(
            f"| bounds: the same, tags by expressions, walk in Python | {_per_call(texts, htmlbounds.scan, repeat):,.1f} | |"
        )
    if real:
        docs = [b.decode("utf-8", "replace") for b in real]
        largest = max(range(len(docs)), key=lambda i: len(docs[i]))
        for label, contexts in (
            (how, ()),
            ("compiled tags, walk in Python", (_walk_in_python,)),
            ("tags by expressions, walk in Python", (_tags_by_expressions, _walk_in_python)),
        ):
            with contextlib.ExitStack() as stack:
                for context in contexts:
                    stack.enter_context(context())
                each = [_per_call([d], htmlbounds.scan, repeat) for d in docs]
            rows.append(
                f"| bounds: htmlbounds.scan, real HTML, mean a page ({label}) | {statistics.mean(each):,.1f} | "
                f"median {statistics.median(each):,.1f}, largest page {each[largest]:,.1f} |"
            )
    for name, make in HOSTILE.items():  # one page each: more runs, for a best that bursts of load miss
        page = make()
        bound = htmlbounds.scan(page)
        compiled = _per_call([page], htmlbounds.scan, 3 * repeat)
        with _walk_in_python():
            python = _per_call([page], htmlbounds.scan, 3 * repeat)
        rows.append(
            f"| bounds, hostile: {name} ({len(page):,} chars) | {compiled:,.1f} | walk in Python {python:,.1f}; {bound} |"
        )
    return rows


def _links_rows(pages: list[bytes], real: list[bytes], repeat: int) -> list[str]:
    """page_links over documents already parsed (the parse itself not counted), simweb's and
    real ones, with the links each yields."""
    url = "http://h17.simweb.test:8000/p/17/intro-to-things.html"
    rows = []
    for corpus, bodies in (("simweb", pages), ("real HTML", real)):
        if not bodies:
            continue
        trees = [LexborHTMLParser(b.decode("utf-8", "replace")) for b in bodies]
        links = sum(len(htmlparse.page_links(t, url).links) for t in trees) / len(trees)
        us = _per_call(trees, lambda t: htmlparse.page_links(t, url), repeat)
        rows.append(f"| links: page_links, {corpus} | {us:,.1f} | {links:,.1f} links a page |")
    return rows


def _link_urls(bodies: list[bytes]) -> list[str]:
    """Every link of the documents, normalised as the parse gives them (one base for all)."""
    base = "http://h17.simweb.test:8000/p/17/intro-to-things.html"
    return [
        link[0]
        for b in bodies
        for link in htmlparse.page_links(LexborHTMLParser(b.decode("utf-8", "replace")), base).links
    ]


def _surt_rows(pages: list[bytes], real: list[bytes], repeat: int) -> list[str]:
    """The CDXJ key of every link of the documents (normalised, as the crawler archives URLs):
    the short way where it answers and the surt library otherwise, against the library alone,
    and the share of URLs the short way answers."""
    rows = []
    for corpus, bodies in (("simweb", pages), ("real HTML", real)):
        urls = _link_urls(bodies)
        if not urls:
            continue
        short = sum(surt_key.short_key(u) is not None for u in urls) / len(urls)
        rows.append(
            f"| surt: surt_key of a link, {corpus} | {_per_call(urls, surt_key.surt_key, repeat):,.2f} | "
            f"{len(urls):,} URLs, {short:.1%} the short way |"
        )
        rows.append(f"| surt: surt.surt of a link, {corpus} | {_per_call(urls, surt.surt, repeat):,.2f} | |")
    return rows


def _shape_rows(pages: list[bytes], real: list[bytes], repeat: int) -> list[str]:
    """The URL-shape check of every link of the documents (normalised, as the candidates
    check them): compiled where it was built, and the Python rules, with how many answers
    differ (none may)."""
    rules = urlshape.ShapeRules()
    how = "compiled" if rules._compiled is not None else "Python (no compiled module)"
    rows = []
    for corpus, bodies in (("simweb", pages), ("real HTML", real)):
        urls = _link_urls(bodies)
        if not urls:
            continue
        differ = sum(rules.check(u) != rules.check_python(u) for u in urls)
        rows.append(
            f"| shape: ShapeRules.check of a link, {corpus} ({how}) | {_per_call(urls, rules.check, repeat):,.2f} | "
            f"{len(urls):,} URLs, {differ} answers differ |"
        )
        rows.append(
            f"| shape: ShapeRules.check_python of a link, {corpus} | {_per_call(urls, rules.check_python, repeat):,.2f} | |"
        )
    return rows


def _hrefs(bodies: list[bytes]) -> list[str]:
    """Every ``<a href>`` of the documents as written, but the ones the parse skips (empty,
    fragment-only, ``javascript:`` and the like)."""
    hrefs = []
    for b in bodies:
        for node in LexborHTMLParser(b.decode("utf-8", "replace")).css("a[href]"):
            href = (node.attributes.get("href") or "").strip()
            if href and href[0] != "#" and not href.startswith(("javascript:", "mailto:", "tel:", "data:")):
                hrefs.append(href)
    return hrefs


def _norm_rows(pages: list[bytes], real: list[bytes], repeat: int) -> list[str]:
    """``urlnorm.normalize`` of every link of the documents against a page's URL, its caches
    emptied before each pass: the compiled steps where they were built, and the Python steps
    alone, with how many answers differ (none may)."""
    base = "http://h17.simweb.test:8000/p/17/intro-to-things.html"
    how = "compiled steps" if urlnorm._compiled is not None else "Python (no compiled module)"

    def answer(fn: Any, href: str) -> str:
        try:
            return fn(href, base)
        except urlnorm.InvalidURL as exc:
            return f"refused: {exc}"

    def per_link(fn: Any, hrefs: list[str]) -> float:
        best = float("inf")
        for _ in range(repeat):
            urlnorm.clear_caches()
            t0 = time.process_time()
            for href in hrefs:
                answer(fn, href)
            best = min(best, (time.process_time() - t0) / len(hrefs) * 1e6)
        return best

    rows = []
    for corpus, bodies in (("simweb", pages), ("real HTML", real)):
        hrefs = _hrefs(bodies)
        if not hrefs:
            continue
        differ = sum(answer(urlnorm.normalize, h) != answer(urlnorm.normalize_python, h) for h in hrefs)
        compiled = urlnorm._compiled
        in_c = (
            sum(compiled(h, base, urlnorm._normalize_authority, urlnorm._DROPPED_NAMES) is not None for h in hrefs)
            if compiled is not None
            else 0
        )
        rows.append(
            f"| norm: normalize of a link, {corpus} ({how}) | {per_link(urlnorm.normalize, hrefs):,.2f} | "
            f"{len(hrefs):,} links, {in_c / len(hrefs):.1%} answered in C, {differ} answers differ |"
        )
        rows.append(
            f"| norm: normalize_python of a link, {corpus} | {per_link(urlnorm.normalize_python, hrefs):,.2f} | |"
        )
    return rows


def _schedule_rows(hosts: int, pages: int, repeat: int) -> list[str]:
    """The revisit schedule of a fetched page (:func:`freshness.schedule_page`), on simweb's
    pages given the ``Date`` and ``Last-Modified`` headers servers send (the bench's pages come
    without them), and the HTTP-date reading it does three times a page."""
    dated = [
        dataclasses.replace(
            r,
            response_headers=[
                *r.response_headers,
                ("Date", email.utils.formatdate(r.fetched_at, usegmt=True)),
                ("Last-Modified", email.utils.formatdate(r.fetched_at - 3 * 86400, usegmt=True)),
            ],
        )
        for r in sample_results(hosts, pages)
    ]
    policy = SchedulePolicy()
    parsed = [freshness.schedule_page(parse_fetch(r, "beamcrawl"), policy) for r in dated]
    dates = [value for r in dated for name, value in r.response_headers if name in ("Date", "Last-Modified")]

    def with_rows(page: Any) -> Any:
        page = freshness.schedule_page(page, policy)
        return record.url_state_cells(page), record.requeue_line(page)

    return [
        f"| schedule: schedule_page of a dated response | "
        f"{_per_call(parsed, lambda page: freshness.schedule_page(page, policy), repeat):,.1f} | |",
        f"| schedule: the same, and the rows of its state (URL state, next visit) | "
        f"{_per_call(parsed, with_rows, repeat):,.1f} | |",
        f"| schedule: parse_http_date of an IMF-fixdate | {_per_call(dates, conditional.parse_http_date, repeat):,.2f} | |",
    ]


def _parse_text(body: bytes) -> str:
    return textfp.tree_text(LexborHTMLParser(body.decode("utf-8", "replace")))


def _gzip_rows(name: str, records: list[bytes], repeat: int) -> list[str]:
    raw = sum(map(len, records)) / len(records)
    rows = []
    for level in LEVELS:
        us = _per_call(records, lambda r: warc_records.gzip_member(r, level), repeat)
        size = sum(len(warc_records.gzip_member(r, level)) for r in records) / len(records)
        used = " (in use)" if level == warc_records.GZIP_LEVEL else ""
        rows.append(
            f"| gzip {level}{used}, {name} | {us:,.1f} | {size:,.0f} B/page, {100 * size / raw:.1f}% of {raw:,.0f} |"
        )
    # What gzip_member did before zlib-ng and the sized window: the standard zlib, a 32 KiB window.
    us = _per_call(records, lambda r: _stdlib_member(r, warc_records.GZIP_LEVEL), repeat)
    size = sum(len(_stdlib_member(r, warc_records.GZIP_LEVEL)) for r in records) / len(records)
    rows.append(
        f"| gzip {warc_records.GZIP_LEVEL}, standard zlib, whole window (before), {name} | {us:,.1f} "
        f"| {size:,.0f} B/page, {100 * size / raw:.1f}% of {raw:,.0f} |"
    )
    return rows


def _stdlib_member(data: bytes, level: int) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, zlib.MAX_WBITS + 16)
    return compressor.compress(data) + compressor.flush()


def main(argv: list[str] | None = None) -> int:
    """Print a Markdown table of µs per call."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=200)
    p.add_argument("--pages", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--html-glob", default="/usr/share/doc/*/*.html")
    p.add_argument("--profile", choices=("simhash", "text", "bounds"))
    p.add_argument("--passes", type=int, default=0, help="only run text_simhash this many times over the texts")
    p.add_argument(
        "--steps",
        default="digest,gzip,text",
        help="which rows: digest (and record), gzip, text (and simhash), bounds, links, surt, shape, norm, schedule",
    )
    args = p.parse_args(argv)
    steps = set(args.steps.split(","))
    pages = simweb_pages(args.hosts, args.pages)
    texts = (
        [_parse_text(b) for b in pages] if "text" in steps or args.profile in ("simhash", "text") or args.passes else []
    )
    if args.passes:
        for _ in range(args.passes):
            for text in texts:
                textfp.text_simhash(text)
        return 0
    if args.profile:
        fn: Callable[[Any], Any] = textfp.text_simhash if args.profile == "simhash" else _parse_text
        items: list[Any] = texts if args.profile == "simhash" else pages
        if args.profile == "bounds":
            fn, items = htmlbounds.scan, [b.decode("utf-8", "replace") for b in real_pages(args.html_glob)]
        prof = cProfile.Profile()
        prof.enable()
        for x in items:
            fn(x)
        prof.disable()
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(12)
        return 0
    real = real_pages(args.html_glob)
    print(
        f"{len(pages)} simweb pages ({sum(map(len, pages)) / len(pages):,.0f} B each); "
        f"{len(real)} real HTML files ({sum(map(len, real)) / max(1, len(real)):,.0f} B each, {args.html_glob})\n"
    )
    print("| step | µs per call | |")
    print("|---|---:|---|")
    digests = [hashlib.sha1(b).digest() for b in pages] * 25  # calls of a few µs: more of them
    bodies = pages * 5
    rows = (
        []
        if "digest" not in steps
        else [
            f"| digest: sha1 + base32 of a body (payload_digest) | {_per_call(bodies, warc_revisit.payload_digest, args.repeat):,.2f} | |",
            f"| sha1 alone of a body | {_per_call(bodies, lambda b: hashlib.sha1(b).digest(), args.repeat):,.2f} | |",
            f"| base32 of a 20-byte digest (warc_records.b32 if present) | "
            f"{_per_call(digests, getattr(warc_records, 'b32', lambda d: __import__('base64').b32encode(d).decode('ascii')), args.repeat):,.2f} | |",
            f"| record: one response record, uncompressed | "
            f"{_per_call(pages, lambda b: warc_records.record(FIELDS, HEAD, b, content_type=warc_records.RESPONSE_CONTENT_TYPE), args.repeat):,.2f} | |",
        ]
    )
    records = [warc_records.record(FIELDS, HEAD, b, content_type=warc_records.RESPONSE_CONTENT_TYPE) for b in pages]
    if "gzip" in steps:
        rows += _gzip_rows("simweb", records, args.repeat)
    if real and "gzip" in steps:
        rows += _gzip_rows(
            "real HTML",
            [warc_records.record(FIELDS, HEAD, b, content_type=warc_records.RESPONSE_CONTENT_TYPE) for b in real],
            args.repeat,
        )
    if "text" in steps:
        rows.append(f"| text: parse + tree_text | {_per_call(pages, _parse_text, args.repeat):,.1f} | |")
        rows.append(
            f"| simhash: text_simhash of the visible text ({'compiled' if textfp.COMPILED else 'Python'}) | "
            f"{_per_call(texts, textfp.text_simhash, args.repeat):,.1f} | |"
        )
        rows += _simhash_rows("simweb", texts, args.repeat)
        if real:
            rows += _simhash_rows("real HTML", [_parse_text(b) for b in real], args.repeat)
    if "bounds" in steps:
        rows += _bounds_rows(pages, real, args.repeat)
    if "links" in steps:
        rows += _links_rows(pages, real, args.repeat)
    if "surt" in steps:
        rows += _surt_rows(pages, real, args.repeat)
    if "shape" in steps:
        rows += _shape_rows(pages, real, args.repeat)
    if "norm" in steps:
        rows += _norm_rows(pages, real, args.repeat)
    if "schedule" in steps:
        rows += _schedule_rows(args.hosts, args.pages, args.repeat)
    print("\n".join(rows))
    return 0


def _simhash_rows(corpus: str, texts: list[str], repeat: int) -> list[str]:
    """The simhash of each text's words (after :func:`textfp._utf8_words`) by both paths, and
    whether they agree: the compiled module where it was built, and the Python one."""
    words = [textfp._utf8_words(t) for t in texts]
    width, weight = textfp.SHINGLE_WORDS, textfp.WORD_WEIGHT
    python = [textfp._words_simhash(w, width, weight) for w in words]
    how = "compiled split" if textfp._compiled_split is not None else "Python split (no compiled module)"
    rows = [
        f"| {corpus}: words of a text (_utf8_words, {how}) | {_per_call(texts, textfp._utf8_words, repeat):,.1f} | |"
    ]
    held, textfp._compiled_split = textfp._compiled_split, None
    try:
        rows.append(
            f"| {corpus}: words of a text, Python split | {_per_call(texts, textfp._utf8_words, repeat):,.1f} | |"
        )
    finally:
        textfp._compiled_split = held
    rows += [
        f"| {corpus}: simhash of the words, Python | "
        f"{_per_call(words, lambda w: textfp._words_simhash(w, width, weight), repeat):,.1f} | |",
    ]
    compiled = textfp._compiled_simhash
    if compiled is not None:
        same = sum(compiled(w, width, weight) == p for w, p in zip(words, python))
        rows.append(
            f"| {corpus}: simhash of the words, compiled | {_per_call(words, lambda w: compiled(w, width, weight), repeat):,.1f} "
            f"| {same}/{len(words)} the same |"
        )
    return rows


if __name__ == "__main__":
    sys.exit(main())
