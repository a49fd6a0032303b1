"""Content seen: the pure decisions, then FindDuplicateContent on a real embedded store,
round after round, and on simweb's copies and look-alikes."""

from __future__ import annotations

import hashlib
import json
import os
import random
import tempfile
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline

from beamcrawl.core import textfp
from beamcrawl.core.urlnorm import fingerprint
from beamcrawl.core.warc_revisit import payload_digest
from beamcrawl.schemas.records import FetchResult, FrontierEntry, ParsedPage, fp_key
from beamcrawl.simweb import SimWeb
from beamcrawl.stores.base import Mutation, open_store
from beamcrawl.transforms.parse import parse_fetch
from beamcrawl.transforms.url_seen import page_candidates
from beamcrawl.transforms.content_seen import (
    CONTENT_TABLE,
    SIMHASH_TABLE,
    ContentRecord,
    Copy,
    Evidence,
    FindDuplicateContent,
    NewContent,
    Probe,
    _Item,
    apply_copy,
    decide_checksums,
    eligible,
    merge_prefix_rows,
    order_key,
    probe_page,
    resolve_round,
    settle,
    simhash_cells,
)

HTML = "text/html; charset=utf-8"


@pytest.fixture
def store_uri(tmp_path) -> str:
    """An embedded store (it has the content tables: stores/base.py lists them)."""
    return f"sqlite:///{tmp_path}/store.sqlite"


@pytest.fixture(params=["embedded", "bigtable"])
def any_store_uri(request: pytest.FixtureRequest, tmp_path) -> str:
    """The embedded store, then Bigtable (the emulator; skipped where there is none)."""
    if request.param == "embedded":
        return f"sqlite:///{tmp_path}/store.sqlite"
    return request.getfixturevalue("bigtable_uri")


def article(seed: int, words: int = 400) -> list[str]:
    rng = random.Random(seed)
    return [f"w{rng.randrange(5000)}x" for _ in range(words)]


def html(words: list[str], extra: str = "") -> bytes:
    paras = " ".join(words)
    return f"<html><head><title>t</title></head><body><p>{paras}</p>{extra}</body></html>".encode()


def page(url: str, body: bytes, *, status: int = 200, ctype: str = HTML, at: float = 1000.0, source: str = "link",
         outcome: str = "fetched") -> ParsedPage:
    entry = FrontierEntry(url=url, fp=fingerprint(url), host=url.split("/")[2], due_ms=0, source=source)
    fetch = FetchResult(entry=entry, outcome=outcome, url=url, final_url=url, status=status, fetched_at=at,
                        response_headers=[("Content-Type", ctype)], body=body, raw_body=body)
    return ParsedPage(fetch=fetch)


def probe(url: str, check: int = 1, simhash: int | None = None, at: float = 1.0) -> Probe:
    return Probe(url, fingerprint(url), check, simhash, at, f"sha1:{url}")


def run(uri: str, pages: list[ParsedPage], round_no: int | None = 1, **kw) -> tuple[dict[str, tuple], dict[str, int]]:
    """Runs FindDuplicateContent; returns (url -> (duplicate_of, kind, distance,
    original_fetched_at, original_digest)) and the content_seen counters."""
    sink = os.path.join(tempfile.gettempdir(), f"content-seen-{uuid.uuid4().hex}.jsonl")
    p = TestPipeline(runner="FnApiRunner")
    marked = p | beam.Create(pages) | FindDuplicateContent(uri, round_no, **kw)
    _ = marked | beam.ParDo(_WriteDecisions(sink))
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace("content_seen"))["counters"]
    out = {}
    with open(sink, encoding="utf-8") as f:
        for line in f:
            url, decision = json.loads(line)
            out[url] = tuple(decision)
    os.remove(sink)
    assert len(out) == len({pg.fetch.url for pg in pages})  # every page comes out, once
    return out, {c.key.metric.name: c.committed for c in counters}


class _WriteDecisions(beam.DoFn):
    """Appends each page's content decision to a JSON-lines file (the runner is in process)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def process(self, pg: ParsedPage) -> None:
        row = [pg.fetch.url, [pg.duplicate_of, pg.duplicate_kind, pg.duplicate_distance,
                              pg.original_fetched_at, pg.original_digest]]
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


# --- pure decisions ----------------------------------------------------------------------


def test_order_key_prefers_no_query_then_short_then_small():
    urls = ["http://b.com/a?print=1", "http://bb.com/a", "http://b.com/a", "http://a.com/a"]
    assert sorted(urls, key=order_key) == ["http://a.com/a", "http://b.com/a", "http://bb.com/a", "http://b.com/a?print=1"]


def test_eligible_pages_are_fetched_payloads_of_any_status():
    assert eligible(page("http://a.com/", b"x"))
    assert eligible(page("http://a.com/f.pdf", b"%PDF", ctype="application/pdf"))
    assert eligible(page("http://a.com/", b"x", status=404))  # identical error pages are stored once
    assert probe_page(page("http://a.com/e", html(article(1)), status=404)).simhash is None  # exact only
    assert not eligible(page("http://a.com/", b"", status=200))
    assert not eligible(page("http://a.com/robots.txt", b"User-agent: *", source="robots"))
    assert not eligible(page("http://a.com/", b"x", outcome="error"))


def test_probe_takes_what_parse_found():
    body = html(article(1))
    parsed = parse_fetch(page("http://a.com/", body).fetch, "beamcrawl")
    got = probe_page(parsed)
    assert got is not None and got.simhash == textfp.html_simhash(body) and f"{got.checksum:016x}" == parsed.checksum
    short = parse_fetch(page("http://a.com/s", b"<html><body><p>Loading</p></body></html>").fetch, "beamcrawl")
    assert short.body_kind == "html" and short.simhash is None
    assert probe_page(short).simhash is None  # parse found too little text: not computed again
    failed = page("http://a.com/f", body)
    failed.parse_error = "RecursionError: too deep"
    assert probe_page(failed).simhash is None  # a hostile body is not parsed twice


def test_probe_computes_what_parse_left_out():
    body = html(article(1))
    got = probe_page(page("http://a.com/", body))
    assert got is not None
    assert got.simhash == textfp.html_simhash(body)
    assert got.digest == payload_digest(body)
    pdf = probe_page(page("http://a.com/f.pdf", b"%PDF-1.4 data", ctype="application/pdf"))
    assert pdf is not None and pdf.simhash is None


def test_decide_checksums_merges_in_one_pass_and_keeps_one_original():
    stored = [
        (5, ContentRecord("http://kept.com/five", "exact", 10.0, "sha1:FIVE", 0, 1)),
        (7, ContentRecord("http://kept.com/seven", "near", None, None, 2, 1)),
        (9, ContentRecord("http://crashed.com/nine", "exact", 30.0, "sha1:NINE", 0, 3)),  # this round
    ]
    groups = [
        (5, [probe("http://x.com/5", 5), probe("http://kept.com/five", 5)]),
        (6, [probe("http://z.com/6?print=1", 6), probe("http://z.com/6", 6), probe("http://yy.com/6", 6)]),
        (7, [probe("http://x.com/7", 7)]),
        (9, [probe("http://x.com/9", 9)]),
    ]
    copies, new = decide_checksums(groups, stored, round_no=3)
    assert copies == [
        Copy("http://x.com/5", "http://kept.com/five", "exact", 0, 10.0, "sha1:FIVE"),  # the original itself: no copy
        Copy("http://x.com/7", "http://kept.com/seven", "near", 2),
    ]
    assert [n.checksum for n in new] == [6, 9]
    assert new[0].first.url == "http://z.com/6" and [p.url for p in new[0].others] == ["http://yy.com/6", "http://z.com/6?print=1"]


def test_stored_prefix_rows_give_the_closest_original_but_never_the_page_itself():
    fp = 0xF0F0_0000_0000_0000
    keys = {t: textfp.table_key(t, textfp.permute(fp, t)) for t in range(20)}
    t = 0
    item = _Item(keys[t], textfp.permute(fp, t), fp, "http://new.com/")
    row_cells = {}
    for other, url, rnd in ((fp ^ 0b111, "http://far3.com/", 1), (fp ^ 0b1, "http://close.com/", 1),
                            (fp, "http://new.com/", 1), (fp, "http://later.com/", 5)):
        for m in simhash_cells(probe(url, simhash=other), rnd):
            if m.key == keys[t]:
                row_cells.update(m.cells or {})
    found, compared, _ = merge_prefix_rows([item], [(b"\x00", {}), (keys[t], row_cells)], round_no=2)
    assert compared == 3  # the round-5 row is not read as an original
    assert found == {"http://new.com/": Evidence("http://new.com/", stored=(1, "http://close.com/"))}


def test_round_pairs_in_a_shared_row():
    fp = 0x1234_5678_9ABC_DEF0
    t = 0  # leading blocks 0, 1, 2: bits 0-1 (block 5) stay in the row, bit 40 (block 2) leaves it
    items = sorted(
        (_Item(textfp.table_key(t, textfp.permute(f, t)), textfp.permute(f, t), f, u)
         for f, u in ((fp, "http://a.com/"), (fp ^ 0b11, "http://b.com/"), (fp ^ (1 << 40), "http://c.com/"))),
        key=lambda it: it.key,
    )
    found, _, pairs = merge_prefix_rows(items, [])
    assert pairs >= 1
    assert ("http://b.com/", 2) in found["http://a.com/"].neighbours
    assert ("http://a.com/", 2) in found["http://b.com/"].neighbours
    assert "http://c.com/" not in found


def test_resolve_round_keeps_the_first_original_and_breaks_chains():
    a, b, c, d = "http://a.com/", "http://b.com/", "http://c.com/", "http://d.com/?x"
    evidence = [
        Evidence(a, neighbours=frozenset({(b, 2)})),
        Evidence(b, neighbours=frozenset({(a, 2), (c, 3)})),
        Evidence(c, neighbours=frozenset({(b, 3), (d, 1)})),  # not near a: a chain
        Evidence(d, neighbours=frozenset({(c, 1)})),
    ]
    # b copies a; c's only earlier neighbour b is a copy, so c is an original; d copies c.
    assert resolve_round(evidence) == [(b, (a, 2)), (d, (c, 1))]
    assert resolve_round(reversed(evidence)) == resolve_round(evidence)


def test_settle_records_originals_and_copies():
    first = probe("http://a.com/", 42, simhash=99, at=7.0)
    other = probe("http://b.com/", 42)
    copies, content, hashes = settle(NewContent(42, first, (other,)), None, round_no=4)
    assert copies == [Copy("http://b.com/", "http://a.com/", "exact", 0, 7.0, "sha1:http://a.com/")]
    assert [m.key for m in content] == [fp_key(42)]
    assert ContentRecord.from_cells(content[0].cells) == ContentRecord("http://a.com/", "exact", 7.0, "sha1:http://a.com/", 0, 4)
    assert len(hashes) == 20 and {m.key[0] for m in hashes} == set(range(20))
    copies, content, hashes = settle(NewContent(42, first, (other,)), ("http://o.com/", 2), round_no=4)
    assert [(c.url, c.original, c.kind) for c in copies] == [("http://a.com/", "http://o.com/", "near"), ("http://b.com/", "http://o.com/", "near")]
    assert ContentRecord.from_cells(content[0].cells).kind == "near" and hashes == []


def test_a_copy_offers_no_links_to_the_frontier():
    body = html(article(1), '<a href="/elsewhere">x</a>')
    parsed = parse_fetch(page("http://mirror.org/a", body).fetch, "beamcrawl")
    assert [c.url for c in page_candidates(parsed)] == ["http://mirror.org/elsewhere"]
    copy = apply_copy(parsed, Copy("http://mirror.org/a", "http://site.com/a", "exact"))
    assert copy.links and page_candidates(copy) == []


def test_an_existing_store_gets_the_content_tables_when_opened(tmp_path):
    import sqlite3

    path = tmp_path / "store.sqlite"
    open_store(str(path)).close()
    with sqlite3.connect(path) as conn:  # a store made before the content tables existed
        conn.execute(f"DROP TABLE {CONTENT_TABLE}")
        conn.execute(f"DROP TABLE {SIMHASH_TABLE}")
    with open_store(str(path)) as store:
        store.mutate(CONTENT_TABLE, [Mutation.set(fp_key(1), ContentRecord("http://a.com/").to_cells())])
        assert [k for k, _ in store.read_range(CONTENT_TABLE)] == [fp_key(1)]
        assert list(store.read_range(SIMHASH_TABLE)) == []


def test_apply_copy_returns_a_new_page():
    original = page("http://b.com/", b"x")
    marked = apply_copy(original, Copy("http://b.com/", "http://a.com/", "exact", 0, 5.0, "sha1:X"))
    assert original.duplicate_of is None
    assert (marked.duplicate_of, marked.duplicate_kind, marked.original_fetched_at) == ("http://a.com/", "exact", 5.0)


# --- the transform -----------------------------------------------------------------------


def round_one() -> list[ParsedPage]:
    a, b = article(1), article(2)
    near = list(a)
    near[200] = "different"
    return [
        page("http://site.com/a", html(a), at=100.0),
        page("http://mirror.org/a", html(a), at=101.0),
        page("http://site.com/a?print=1", html(a), at=102.0),
        page("http://near-copy.net/a", html(near), at=103.0),
        page("http://site.com/b", html(b), at=104.0),
        page("http://site.com/gone", html(a), status=404),
        page("http://site.com/f.pdf", b"%PDF-1.4 one", ctype="application/pdf"),
        page("http://mirror.org/f.pdf", b"%PDF-1.4 one", ctype="application/pdf"),
        page("http://site.com/robots.txt", b"User-agent: *\n", ctype="text/plain", source="robots"),
        page("http://other.com/robots.txt", b"User-agent: *\n", ctype="text/plain", source="robots"),
    ]


def test_copies_in_one_round(store_uri):
    pages = round_one()
    got, counters = run(store_uri, pages)
    digest = payload_digest(html(article(1)))
    assert got["http://site.com/a"] == (None, None, None, None, None)
    assert got["http://mirror.org/a"] == ("http://site.com/a", "exact", 0, 100.0, digest)
    assert got["http://site.com/a?print=1"] == ("http://site.com/a", "exact", 0, 100.0, digest)
    assert got["http://near-copy.net/a"][:2] == ("http://site.com/a", "near")
    assert got["http://near-copy.net/a"][2] <= 3
    assert got["http://site.com/b"][0] is None
    # an error page carrying a stored page's bytes is an exact copy (stored once), never a near one
    assert got["http://site.com/gone"][:2] == ("http://site.com/a", "exact")
    assert got["http://mirror.org/f.pdf"][:2] == ("http://site.com/f.pdf", "exact")
    assert got["http://site.com/robots.txt"][0] is None and got["http://other.com/robots.txt"][0] is None
    assert counters["new_originals"] == 3  # a, b, the PDF
    assert counters["exact_copies"] == 4 and counters["near_copies_marked"] == 1  # mirror.org/a, ?print=1, gone (404), mirror.org/f.pdf

    with open_store(store_uri) as store:
        content = {k: ContentRecord.from_cells(c) for k, c in store.read_range(CONTENT_TABLE)}
        simhash_rows = list(store.read_range(SIMHASH_TABLE))
    assert len(content) == 4  # a, the near copy's bytes, b, the PDF
    near_row = [r for r in content.values() if r.kind == "near"]
    assert [(r.url, r.round) for r in near_row] == [("http://site.com/a", 1)]
    assert {len(cells) for _, cells in simhash_rows} == {1}
    assert len(simhash_rows) == 2 * 20  # two HTML originals (a, b) in 20 tables


def test_one_original_whatever_the_input_order(store_uri, tmp_path):
    pages = round_one()
    first, _ = run(store_uri, pages)
    other_uri = f"sqlite:///{tmp_path}/other.sqlite"
    second, _ = run(other_uri, list(reversed(pages)), bits=2)
    assert first == second


def test_later_rounds_find_copies_of_what_was_kept(any_store_uri):
    store_uri = any_store_uri
    run(store_uri, round_one(), round_no=1)
    a = article(1)
    near = list(a)
    near[50] = "another"
    later = [
        page("http://site.com/a", html(a), at=500.0),  # unchanged: not a copy of itself
        page("http://new.org/a", html(a), at=501.0),
        page("http://new.org/near", html(near), at=502.0),
        page("http://new.org/copy-of-near", html([*a[:200], "different", *a[201:]]), at=503.0),
        page("http://new.org/f.pdf", b"%PDF-1.4 one", ctype="application/pdf"),
        page("http://new.org/c", html(article(3))),
    ]
    got, counters = run(store_uri, later, round_no=2)
    assert got["http://site.com/a"][0] is None
    assert got["http://new.org/a"] == ("http://site.com/a", "exact", 0, 100.0, payload_digest(html(a)))
    assert got["http://new.org/near"][:2] == ("http://site.com/a", "near")
    # Bytes that were a near copy last round are a near copy of the same original now.
    assert got["http://new.org/copy-of-near"][:2] == ("http://site.com/a", "near")
    assert got["http://new.org/f.pdf"][:2] == ("http://site.com/f.pdf", "exact")
    assert got["http://new.org/c"][0] is None
    assert counters["exact_copies_of_stored"] == 3


def test_rerun_of_a_round_decides_the_same(store_uri):
    first, _ = run(store_uri, round_one(), round_no=1)
    again, _ = run(store_uri, round_one(), round_no=1)  # the round crashed after recording
    assert again == first
    next_round, _ = run(store_uri, round_one(), round_no=2)
    # In the next round the kept page is itself, unchanged; its copies still copy it.
    assert next_round["http://site.com/a"][0] is None
    assert next_round["http://mirror.org/a"][:2] == ("http://site.com/a", "exact")


@pytest.mark.parametrize("path", ["scan", "keyset", "auto"])
def test_scan_and_keyset_paths_agree(any_store_uri, path):
    store_uri = any_store_uri
    run(store_uri, round_one(), round_no=1)
    with open_store(store_uri) as store:  # bulk up the tables so a scan has rows to skip
        rng = random.Random(4)
        filler = [ContentRecord(f"http://filler/{i}", round=1) for i in range(300)]
        store.mutate(CONTENT_TABLE, [Mutation.set(fp_key(rng.getrandbits(64)), r.to_cells()) for r in filler])
        store.mutate(SIMHASH_TABLE, [m for i in range(50) for m in simhash_cells(probe(f"http://f/{i}", simhash=rng.getrandbits(64)), 1)])
    a = article(1)
    got, counters = run(store_uri, [page("http://new.org/a", html(a)), page("http://new.org/b", html([*a[:10], "x", *a[11:]]))],
                        round_no=2, path=path, bits=1)
    assert got["http://new.org/a"][:2] == ("http://site.com/a", "exact")
    assert got["http://new.org/b"][:2] == ("http://site.com/a", "near")
    if path == "scan":
        assert counters.get("content_path_keyset", 0) == 0 and counters["content_path_scan"] >= 1
        assert counters["simhash_rows_scanned"] >= 1
    if path == "keyset":
        assert counters.get("content_path_scan", 0) == 0 and counters["content_keys_looked_up"] == 2


def test_near_copies_in_one_round_keep_exactly_one_original(store_uri):
    base = article(7, 600)
    # Six servings of one story, each with its own view counter: different bytes, one text.
    variants = [page(f"http://host{i}.com/story", html(base, f"<p>{i * 137 + 5} views</p>")) for i in range(6)]
    got, _ = run(store_uri, list(reversed(variants)))
    originals = [u for u, d in got.items() if d[0] is None]
    assert originals == ["http://host0.com/story"]
    assert {d[0] for u, d in got.items() if d[0]} == {"http://host0.com/story"}


# --- on simweb ---------------------------------------------------------------------------


def simweb_pages(web: SimWeb) -> Iterator[ParsedPage]:
    for hi in range(web.hosts):
        host = web.names[hi]
        for j in range(web.pages_per_host):
            path = web.page_path(hi, j)
            for target in (path, path + "?print=1") if j % 5 == 0 else (path,):
                resp = web.respond(host, target)
                yield page(web.url(hi, target), resp.body, ctype=resp.content_type)


def test_simweb_every_byte_identical_copy_is_caught_and_no_look_alike_is_merged(store_uri):
    web = SimWeb(30, seed=3, pages_per_host=12, copy_hosts_from=0)
    pages = list(simweb_pages(web))
    got, _ = run(store_uri, pages)
    by_bytes: dict[str, list[str]] = {}
    for p in pages:
        by_bytes.setdefault(hashlib.sha1(p.fetch.body).hexdigest(), []).append(p.fetch.url)
    assert any(len(urls) > 2 for urls in by_bytes.values())
    for urls in by_bytes.values():
        unmarked = [u for u in urls if got[u][0] is None]
        assert len(unmarked) <= 1, urls  # all but one marked (all, when the bytes are a near copy)
    body = {p.fetch.url: p.fetch.body for p in pages}
    for url, (original, kind, *_rest) in got.items():
        if kind == "exact":
            assert body[original] == body[url]
    # Look-alikes (one template, different articles) stay apart.
    def model(url: str):
        parts = urlsplit(url)
        hi = web.index[parts.hostname]
        return web.page_model(hi, web.page_index(hi, parts.path))

    near = [(u, o) for u, (o, kind, *_rest) in got.items() if kind == "near"]
    assert len(near) > 20
    for url, original in near:
        assert model(url).text_key == model(original).text_key, (url, original)  # the same article
