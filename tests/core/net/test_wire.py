"""One request on the wire per request planned, and each answer filed under its request.

Checked at the socket level, from the server's own log: a raw asyncio server on loopback
(tests/wire_shapes.py) resets after part of the headers, closes before answering, answers
``100 Continue`` and closes, and on kept-alive connections sends what no request asked for
(a second response at once, in a write of its own, 300 ms later; a response head alone;
bytes that are no HTTP). The crawler's fetcher (``FetchRunner``, the real fetch loop) and
its session (``open_session``) are what is tested; nothing is mocked.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
import gzip
import time
from typing import Any
from collections.abc import Iterator
from urllib.parse import urlsplit

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamcrawl.core.net.conditional import parse_etag
from beamcrawl.core.net.fetcher import FetchRunner, error_kind
from beamcrawl.core.net.gate import open_session
from beamcrawl.core.net.wire import UnsendableHeader, UnsendableUrl, client_headers, request_url
from beamcrawl.core.net.netpolicy import ResolveRules
from beamcrawl.core.net.resolver import PolicyResolver
from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.core.urls.urlnorm import normalize
from beamcrawl.schemas.records import FetchResult, FrontierEntry, HostPlan, HostRecord
from beamcrawl.transforms.warc_io import request_member
from wire_shapes import SMUGGLED, STRAY, ShapeServer, field_lines, response  # noqa: E402  (tests/wire_shapes.py)

LOST = ("rsthdr", "close", "1xx")
DESYNC = ("now", "split", "late", "head", "junk")
HELD = ("1xx", "http09", "tls", "headers", "longline")
# A host's delay well past LATE, so a late stray has arrived before the next request is written
# (a stray that comes after the next request left is, on HTTP/1.1, that request's answer).
DELAY = 0.8


def _cfg(**kw) -> CrawlConfig:
    base = dict(
        out="/tmp/o",
        store="sqlite:///tmp/o",
        min_delay=DELAY,
        round_window=30,
        allow_private_networks=True,
        resolve=(("*.test", "127.0.0.1"),),
        total_timeout=5.0,
    )
    base.update(kw)
    return CrawlConfig(**base)


def _plan(port: int, host: str, paths: list[str]) -> HostPlan:
    slot = f"{host}:{port}"
    record = HostRecord(host=slot)
    record.robots = RobotsRules.parse("", "beamcrawl").to_dict()
    record.robots_fetched_at = time.time()
    entries = [FrontierEntry(url=f"http://{slot}{p}", fp=i + 1, host=slot, due_ms=0) for i, p in enumerate(paths)]
    return HostPlan(host=slot, shard=0, record=record, delay=DELAY, fetch_robots=False, entries=entries)


def _drain_plan(plan: HostPlan, config: CrawlConfig | None = None) -> list[tuple[str, Any]]:
    """Everything fetching one host's plan gives out: ``(kind, value)`` items."""
    runner = FetchRunner(config or _cfg())
    try:
        runner.submit(plan)
        return list(runner.drain(wait=True))
    finally:
        runner.close()


def _fetch_sites(server: ShapeServer, plans: dict[str, list[str]], site: Any) -> list[FetchResult]:
    """Each host of ``plans`` served by ``site`` on ``server`` and its paths fetched, 0.05 s
    apart, all in one runner: the results."""
    for host in plans:
        server.sites[host] = site
    return _fetch(server, plans, _cfg(min_delay=0.05), delay=0.05)


def _run_plan(plan: HostPlan) -> list[FetchResult]:
    """The results of fetching one host's plan."""
    return [v for k, v in _drain_plan(plan) if k == "result"]


def _plans() -> dict[str, list[str]]:
    plans = {}
    for shape in LOST:
        # after a page, on the kept-alive connection (the trial's case), and on a fresh one
        plans[f"reuse-{shape}.test"] = ["/page-a", f"/lost-{shape}-b", "/page-c"]
        plans[f"fresh-{shape}.test"] = [f"/lost-{shape}-a", "/page-b"]
    for how in DESYNC:
        plans[f"desync-{how}.test"] = [f"/smuggle-{how}-a", "/page-b", "/page-c"]
    for how in HELD:
        plans[f"held-{how}.test"] = ["/page-a", f"/held-{how}-b", "/page-c"]
    return plans


def _fetch(server: ShapeServer, plans: dict[str, list[str]], config: CrawlConfig, delay: float | None = None) -> list:
    """Each host's paths of ``plans`` fetched from ``server`` in one runner (each plan's delay
    ``delay`` when given): the results."""
    runner = FetchRunner(config)
    try:
        for host, paths in plans.items():
            plan = _plan(server.port, host, paths)
            runner.submit(plan if delay is None else replace(plan, delay=delay))
        out = list(runner.drain(wait=True))
    finally:
        runner.close()
    return [v for k, v in out if k == "result"]


@pytest.fixture(scope="module")
def shaped() -> Iterator[tuple[ShapeServer, dict[str, list[str]], dict[str, object]]]:
    plans = _plans()
    with ShapeServer() as server:
        results = _fetch(server, plans, _cfg())
    yield server, plans, {r.url: r for r in results}


def _path(url: str) -> str:
    return "/" + url.split("/", 3)[3]


@pytest.mark.parametrize("where", ["reuse", "fresh"])
@pytest.mark.parametrize("shape", LOST)
def test_a_lost_answer_is_one_request_on_the_wire(shaped, shape, where):
    server, plans, results = shaped
    host = f"{where}-{shape}.test"
    # The server saw each planned request once: the client did not send the lost one again.
    assert server.paths(host) == plans[host]
    lost = next(r for url, r in results.items() if f"//{host}:" in url and "/lost-" in url)
    assert lost.outcome == "error" and error_kind(lost.error) == "connection_lost", lost.error
    # The scheduler went on with the host's next page, which was fetched as it was served.
    after = next(r for url, r in results.items() if f"//{host}:" in url and url.endswith(plans[host][-1]))
    assert after.outcome == "fetched" and after.status == 200


@pytest.mark.parametrize("how", DESYNC)
def test_an_answer_is_only_filed_under_the_request_it_answers(shaped, how):
    server, plans, results = shaped
    host = f"desync-{how}.test"
    assert server.paths(host) == plans[host]
    served = {r.path: r.body for r in server.requests if r.host == host}
    mine = {_path(url): r for url, r in results.items() if f"//{host}:" in url}
    assert set(mine) == set(plans[host])
    for path, result in mine.items():
        assert result.outcome == "fetched", (path, result.error)
        assert result.body == served[path] and result.raw_body == served[path], path
        assert SMUGGLED not in result.body


# --- generated strays, on the crawler's session ------------------------------------------

_strays = st.one_of(
    st.binary(min_size=0, max_size=200).map(response),  # a whole second response
    st.binary(min_size=1, max_size=200),  # any bytes at all
    st.integers(min_value=0, max_value=10_000).map(
        lambda n: b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % n  # a head that would swallow the next answer
    ),
    st.sampled_from(list(STRAY.values())),
)


async def _get_three(server: ShapeServer, host: str, stray_after: int) -> list[bytes | None]:
    """GETs three pages of ``host`` through the crawler's session, one after another, waiting
    after the ``stray_after``-th until the server has sent its stray bytes. A body is None
    when the client refused the answer (stray bytes that are no HTTP, read with it)."""
    resolver = PolicyResolver(ResolveRules((("*.test", "127.0.0.1"),)), True)
    session = open_session(resolver, True, limit_per_host=1)
    bodies = []
    try:
        for i in range(3):
            try:
                async with session.get(f"http://{host}:{server.port}/page-{i}") as resp:
                    bodies.append(await resp.read())
            except aiohttp.ClientError:
                bodies.append(None)
            if i == stray_after:
                assert await asyncio.get_running_loop().run_in_executor(None, server.stray_sent.wait, 10)
                # the bytes are in this socket's buffer now; let the loop read them
                await asyncio.sleep(0.02)
    finally:
        await session.close()
        await resolver.close()
    return bodies


_counter = [0]  # examples so far: each gets a host of its own (and so connections of its own)


def _check_strays(server: ShapeServer, n: list[int], stray: bytes, stray_after: int) -> None:
    n[0] += 1
    host = f"h{n[0]}.test"
    server.stray = {f"/page-{stray_after}": stray}
    server.stray_sent.clear()
    bodies = asyncio.run(_get_three(server, host, stray_after))
    served = [r for r in server.requests if r.host == host]
    assert [r.path for r in served] == [f"/page-{i}" for i in range(3)]  # one request each
    for i, (body, answer) in enumerate(zip(bodies, served)):
        # Each answer is what was served for that URL. The one the stray bytes followed may
        # be refused, when they came in the same read and are no HTTP; never another.
        assert body == answer.body or (body is None and i == stray_after), (i, body)


@pytest.fixture(scope="module")
def shape_server() -> Iterator[ShapeServer]:
    with ShapeServer() as server:
        yield server


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stray=_strays, stray_after=st.integers(min_value=0, max_value=1))
def test_stray_bytes_never_become_the_next_answer(shape_server, stray, stray_after):
    _check_strays(shape_server, _counter, stray, stray_after)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stray=_strays, stray_after=st.integers(min_value=0, max_value=1))
def test_stray_bytes_never_become_the_next_answer_many(shape_server, stray, stray_after):
    _check_strays(shape_server, _counter, stray, stray_after)


@pytest.mark.parametrize("how", HELD)
def test_what_held_before_still_holds(shaped, how):
    """1xx before the 200, HTTP/0.9, TLS bytes on a plain port, 20,000 headers, a 200 KB
    header line: one request each, an answer or a bounded error, and the host's next page
    read from a connection of its own, as served."""
    server, plans, results = shaped
    host = f"held-{how}.test"
    assert server.paths(host) == plans[host]
    served = {r.path: r.body for r in server.requests if r.host == host}
    mine = {_path(url): r for url, r in results.items() if f"//{host}:" in url}
    held = mine[f"/held-{how}-b"]
    if how == "1xx":
        assert held.outcome == "fetched" and held.status == 200 and held.body == served[f"/held-{how}-b"]
    else:
        assert held.outcome == "error" and error_kind(held.error) in ("bad_response", "connection_lost"), held.error
    for path in ("/page-a", "/page-c"):
        assert mine[path].outcome == "fetched" and mine[path].body == served[path], path


# --- the request target sent is the URL held ------------------------------------------------

# Escapes yarl would decode or re-case if the client re-quoted the URL (reserved characters,
# unreserved ones, lower-case hex), characters a normalised URL keeps as they are, and
# characters normalisation escapes.
_ESCAPES = ["%40", "%3A", "%2F", "%3F", "%26", "%3D", "%2C", "%21", "%24", "%27", "%2B", "%3B", "%41", "%7E", "%7e"]
_RAW = list("@:,!$'()*+;=~[]|^-._/") + ["%", "%zz", "é", " ", "#x", "?", "&", "="]
_tails = st.lists(st.sampled_from(_ESCAPES + _RAW + list("abcXYZ019")), min_size=1, max_size=12).map("".join)


def _recorded_target(result) -> str:
    """The request target the WARC request record of ``result`` says was sent."""
    member = request_member(result, "<urn:uuid:c>", "<urn:uuid:r>")
    block = gzip.decompress(member).split(b"\r\n\r\n", 1)[1]
    method, target, version = block.split(b"\r\n", 1)[0].decode("ascii").split(" ")
    assert (method, version) == ("GET", "HTTP/1.1")
    return target


def _as_sent(url: str) -> tuple[str, str]:
    """``url`` as the client is to send it (all of it but a fragment, an empty query's ``?``
    too) and its request target."""
    held = url.partition("#")[0]
    parts = urlsplit(held)
    target = held[len(f"{parts.scheme}://{parts.netloc}") :]
    assert target.startswith("/"), url  # a normalised URL's path is never empty
    return held, target


@settings(max_examples=300, deadline=None)
@given(path=_tails, query=st.none() | _tails)
def test_the_client_is_given_the_url_as_held(path, query):
    url = normalize(f"/p-{path}" + ("" if query is None else f"?{query}"), "http://host.test:8080/")
    sent = request_url(url)
    assert (str(sent), sent.raw_path_qs) == _as_sent(url)
    fetch = FetchResult(entry=FrontierEntry(url=url, fp=1, host="host.test:8080", due_ms=0), outcome="fetched", url=url)
    assert _recorded_target(fetch) == sent.raw_path_qs


@pytest.mark.parametrize(
    "url", ["http://a.test/a b", "http://a.test/\u00e9", "http://a.test/\x00", "http://a.test/\x7f"]
)
def test_a_url_no_request_line_carries_is_refused(url):
    with pytest.raises(UnsendableUrl):
        request_url(url)


def _served_targets(paths: list[str], extra: list[str] = ()) -> tuple[ShapeServer, dict[str, object]]:
    """Fetches each of ``paths`` (and ``extra``, as planned, not normalised) on a host of its
    own; the server, and the results by URL."""
    with ShapeServer() as server:
        plans = {f"t{i}.test": [p] for i, p in enumerate([*paths, *extra])}
        results = _fetch(server, plans, _cfg())
    return server, {r.url: r for r in results}


@settings(max_examples=15, deadline=None)
@given(tails=st.lists(st.tuples(_tails, st.none() | _tails), min_size=1, max_size=6))
def test_the_server_is_asked_for_the_target_the_archive_records(tails):
    """On the wire, from the server's log: each URL's request line carries its path and query
    as the crawler holds them (re-quoted, ``/page-%40`` went out as ``/page-@``), the same
    target its WARC request record names, and the answer is filed under that URL."""
    urls = [normalize(f"/page-{p}" + ("" if q is None else f"?{q}"), "http://x.test/") for p, q in tails]
    server, results = _served_targets(["/" + url.split("/", 3)[3] for url in urls])
    for i, url in enumerate(urls):
        host = f"t{i}.test"
        (result,) = [r for u, r in results.items() if f"//{host}:" in u]
        assert result.outcome == "fetched", result.error
        (seen,) = server.paths(host)
        assert seen == _recorded_target(result) == _as_sent(url)[1]
        assert result.final_url == _as_sent(result.url)[0]
        assert result.body == next(r.body for r in server.requests if r.host == host)


def test_a_url_the_request_line_cannot_carry_is_not_sent():
    server, results = _served_targets(["/page-a"], ["/page-b c", "/page-\u00e9"])
    assert server.paths("t0.test") == ["/page-a"]
    assert server.paths("t1.test") == [] and server.paths("t2.test") == []
    for host in ("t1.test", "t2.test"):
        (result,) = [r for url, r in results.items() if f"//{host}:" in url]
        assert result.outcome == "error" and result.error.startswith("UnsendableUrl"), result.error


def test_the_target_robots_txt_allowed_is_the_target_sent():
    """robots.txt forbids ``/page-q?next=/``; ``?next=%2Fx`` is another string (RFC 9309
    compares a reserved character's escape as it is), so the crawler asks for it. Re-quoted,
    the request line said ``?next=/x``: a request robots.txt forbids, seen from the server."""
    rules = RobotsRules.parse("User-agent: *\nDisallow: /page-q?next=/\n", "beamcrawl")
    url = "/page-q?next=%2Fx"
    with ShapeServer() as server:
        plan = _plan(server.port, "r.test", [url, "/page-q?next=/y"])
        plan.record.robots = rules.to_dict()
        results = _run_plan(plan)
    assert server.paths("r.test") == [url]
    assert sorted(r.outcome for r in results) == ["fetched", "robots_disallowed"]
    assert rules.allowed(f"http://r.test{url}") and not rules.allowed(
        "http://r.test/page-q?next=/x"
    )  # what went out re-quoted


def test_an_empty_query_is_sent_as_held():
    """``/page-b?`` is not ``/page-b``: robots.txt's ``$`` tells them apart (RFC 9309 §2.2.3),
    and so may the server. The crawler checks ``/page-b?``, which ``Disallow: /page-b$``
    allows; the client used to drop the bare ``?`` and ask for ``/page-b``, which the rule
    forbids: a violation only the server saw. The request line, the WARC request record and
    the URL the answer is filed under all keep the ``?``."""
    rules = RobotsRules.parse("User-agent: *\nDisallow: /page-b$\n", "beamcrawl")
    with ShapeServer() as server:
        plan = _plan(server.port, "q.test", ["/page-b?", "/page-b", "/?"])
        plan.record.robots = rules.to_dict()
        results = {r.url: r for r in _run_plan(plan)}
    assert server.paths("q.test") == ["/page-b?", "/?"]
    for path, outcome in (("/page-b?", "fetched"), ("/page-b", "robots_disallowed"), ("/?", "fetched")):
        result = results[f"http://q.test:{server.port}{path}"]
        assert result.outcome == outcome, (path, result.error)
        if outcome == "fetched":
            assert _recorded_target(result) == path
            assert result.final_url == result.url


def test_robots_txt_with_a_query_is_decided_by_the_rules():
    """RFC 9309 §2.2.2 allows the URI ``/robots.txt``; a link to ``/robots.txt?x=1`` (or
    ``/robots.txt?``) asks for another target, which ``Disallow: /`` forbids. It was let
    through, as protego lets it through, and the server saw it."""
    rules = RobotsRules.parse("User-agent: *\nDisallow: /\n", "beamcrawl")
    with ShapeServer() as server:
        plan = _plan(server.port, "r.test", ["/robots.txt?x=1", "/robots.txt?", "/robots.txt"])
        plan.record.robots = rules.to_dict()
        results = {r.url: r.outcome for r in _run_plan(plan)}
    assert server.paths("r.test") == ["/robots.txt"]
    base = f"http://r.test:{server.port}"
    assert results == {
        f"{base}/robots.txt?x=1": "robots_disallowed",
        f"{base}/robots.txt?": "robots_disallowed",
        f"{base}/robots.txt": "fetched",
    }


# ETags as the crawler stores them: the header's bytes read as latin-1 (obs-text is legal in an
# entity-tag, RFC 9110 §8.8.3); these are UTF-8 bytes, the only obs-text the client can echo.
_ETAGS = ['"caf\xc3\xa9"', '"\xe2\x82\xac-1"', 'W/"x\xc3\xa9y"', '"plain-1"']


@pytest.mark.parametrize("etag", _ETAGS)
def test_a_validator_is_echoed_byte_for_byte_and_recorded_as_sent(etag):
    """The stored ETag goes back in If-None-Match as the bytes it came as, and the WARC
    request record's head is the head the server read, byte for byte. The client used to
    UTF-8-encode the latin-1 text (the bytes ``caf`` C3 A9 went out as ``caf`` C3 83 C2 A9),
    while the record wrote the bytes received: neither the server's comparison nor the
    record held."""
    with ShapeServer() as server:
        plan = _plan(server.port, "e.test", ["/page-a"])
        plan.entries[0].revisit = {"etag": etag}
        (result,) = [r for r in _run_plan(plan) if r.url.endswith("/page-a")]
    (served,) = server.requests
    assert b"\r\nIf-None-Match: " + etag.encode("latin-1") + b"\r\n" in served.head
    member = request_member(result, "<urn:uuid:c>", "<urn:uuid:r>")
    assert gzip.decompress(member).split(b"\r\n\r\n", 1)[1].rstrip(b"\r\n") + b"\r\n\r\n" == served.head


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(min_size=1, max_size=12))
def test_a_stored_etag_reaches_the_client_as_its_bytes(raw):
    """Whatever bytes an ETag came as: if it is kept, the text the client is given encodes
    (as aiohttp writes it, UTF-8) to exactly those bytes; if not, it is not kept."""
    wire = b'"' + raw + b'"'
    held = parse_etag(wire.decode("latin-1"))  # as the fetcher reads a header
    if held is None:
        return
    ((_, sent),) = client_headers([("If-None-Match", held)])
    assert sent.encode("utf-8") == held.encode("latin-1") == wire


@pytest.mark.parametrize("stored", ["Sun, 06 Nov 1994 08:49:37 GMT\xe9", "\x01Sun, 06 Nov 1994 08:49:37 GMT"])
def test_a_revisit_goes_out_whatever_last_modified_was_stored(stored):
    """A Last-Modified the date parser read past a byte in (non-UTF-8 obs-text, a control
    character) was kept, and the client refused to write it back: the revisit failed with
    UnsendableHeader, no request went out, and so on every revisit of the URL. The request
    now goes out without it, and the WARC request record is the head the server read."""
    with ShapeServer() as server:
        plan = _plan(server.port, "m.test", ["/page-a"])
        plan.entries[0].revisit = {"last_modified": stored}
        (result,) = [r for r in _run_plan(plan) if r.url.endswith("/page-a")]
    assert result.outcome == "fetched", result.error
    (served,) = server.requests
    assert b"If-Modified-Since" not in served.head
    member = request_member(result, "<urn:uuid:c>", "<urn:uuid:r>")
    assert gzip.decompress(member).split(b"\r\n\r\n", 1)[1].rstrip(b"\r\n") + b"\r\n\r\n" == served.head


def test_a_header_the_client_cannot_write_is_refused():
    with pytest.raises(UnsendableHeader):
        client_headers([("If-None-Match", '"caf\xe9"')])
    with pytest.raises(UnsendableHeader):
        client_headers([("X", "\u20ac")])
    plain = [("Accept", "text/html")]
    assert client_headers(plain) is plain


@pytest.mark.parametrize("retry_after", [b"\xb2", b"31 Dec 9999 23:59:59 -9999999999990"])
def test_a_503_with_any_retry_after_fails_no_other_url_of_its_host(retry_after):
    """A 503 whose Retry-After is the byte B2 (``²``, a digit to ``str.isdigit``) or a date
    whose zone overflows: booking the answer raised, the host's crawl stopped as an internal
    error, and its other URLs (with those already fetched) were given back deferred. The
    answer is booked (no wait taken from the header), and the host's other pages fetched."""
    answer = b"HTTP/1.1 503 Busy\r\nRetry-After: " + retry_after + b"\r\nContent-Length: 4\r\n\r\nbusy"

    async def site(served, writer):
        served.body = answer if served.path == "/page-a" else response(f"page {served.path}".encode())
        writer.write(served.body)
        await writer.drain()
        return True

    with ShapeServer() as server:
        server.sites["busy.test"] = site
        out = _drain_plan(_plan(server.port, "busy.test", ["/page-a", "/page-b", "/page-c"]), _cfg(min_delay=0.05))
    assert [kind for kind, _ in out if kind == "failed"] == []
    results = {_path(r.url): r for kind, r in out if kind == "result"}
    assert sorted(results) == ["/page-a", "/page-b", "/page-c"] and len(out) == 4  # three results, one host
    assert results["/page-a"].status == 503
    assert [results[p].outcome for p in ("/page-b", "/page-c")] == ["fetched", "fetched"]


def test_a_host_whose_crawl_fails_keeps_its_clock_and_each_url_one_result(monkeypatch):
    """A bug raised while a host is crawled (here booking its second answer, a 503 with
    ``Retry-After: 120``) stops that host's crawl. It gave back every URL of the plan as
    deferred, the one already fetched too (a second result for it), and emitted the host
    record the plan came with: the round's requests and the server's hold were gone from
    the clock the next round reads. Only the URLs without a result are given back now, and
    the record keeps the clock."""
    from beamcrawl.core.net.fetcher import HostCrawler

    answer = b"HTTP/1.1 503 Busy\r\nRetry-After: 120\r\nContent-Length: 4\r\n\r\nbusy"

    async def site(served, writer):
        served.body = answer if served.path == "/page-b" else response(f"page {served.path}".encode())
        writer.write(served.body)
        await writer.drain()
        return True

    booked = HostCrawler._after
    calls = []

    def after(self, record, result, rules, floor):
        booked(self, record, result, rules, floor)
        calls.append(result.url)
        if len(calls) == 2:
            raise RuntimeError("a bug")

    monkeypatch.setattr(HostCrawler, "_after", after)
    with ShapeServer() as server:
        server.sites["bug.test"] = site
        out = _drain_plan(_plan(server.port, "bug.test", ["/page-a", "/page-b", "/page-c"]), _cfg(min_delay=0.05))
        served = list(server.requests)
    assert [kind for kind, _ in out if kind == "failed"] == ["failed"]
    results = [(_path(r.url), r.outcome) for kind, r in out if kind == "result"]
    assert sorted(results) == [("/page-a", "fetched"), ("/page-b", "deferred"), ("/page-c", "deferred")]
    ((_, host),) = [(kind, v) for kind, v in out if kind == "host"]
    assert [s.path for s in served] == ["/page-a", "/page-b"]
    assert host.last_fetch_end >= served[-1].start  # the second request is on the clock
    assert host.not_before >= served[-1].end + 100  # and the server's hold


# --- a Transfer-Encoding whose chunked is not the last coding ----------------------------

_te_elements = st.sampled_from(["chunked", "gzip", "deflate", "identity", "", " ", "Chunked"])


@st.composite
def _unframed_lists(draw) -> list[str]:
    """Transfer-Encoding field lines, as sent, that name ``chunked`` but not as the one last
    coding of a list without empty elements: a coding after it (on its line or a later one),
    or an empty element (``chunked,``, a line of its own left empty)."""
    elements = draw(st.lists(_te_elements, min_size=1, max_size=4))
    at = draw(st.integers(0, len(elements)))
    elements.insert(at, "chunked")
    if all(e.strip() for e in elements) and elements[-1].lower() == "chunked":
        elements.append(draw(st.sampled_from(["gzip", "", "identity"])))
    cuts = draw(st.lists(st.booleans(), min_size=len(elements) - 1, max_size=len(elements) - 1))
    return [",".join(line) for line in field_lines(elements, cuts)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lists=st.lists(_unframed_lists(), min_size=1, max_size=4))
def test_a_body_whose_chunked_is_not_the_last_transfer_coding_is_one_error(lists):
    """``Transfer-Encoding: chunked, gzip`` (a coding after chunked), ``chunked,`` (an empty
    element), ``chunked`` then a line ``gzip``: RFC 9112 §6.3 reads such a body to the
    close, its chunks not undone, and the HTTP client did so; the fetcher then undid the
    other codings and took the rest for the entity. The WARC record held the chunk framing
    (``3 CRLF abc CRLF 0 CRLF CRLF``) as the page, under a head that names no coding, and
    parse read it. Such a body is one fetch error; the host's next page is its own."""
    chunks = b"3\r\nabc\r\n0\r\n\r\n"
    plans: dict[str, list[str]] = {}
    answers: dict[str, bytes] = {}
    for i, lines in enumerate(lists):
        head = b"".join(b"Transfer-Encoding: %s\r\n" % line.encode() for line in lines)
        answers[f"te{i}.test"] = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" + head + b"\r\n" + chunks
        plans[f"te{i}.test"] = ["/bad", "/page-b"]

    async def site(served, writer):
        if served.path != "/bad":
            served.body = f"page {served.path} of {served.host}".encode()
            writer.write(response(served.body))
            await writer.drain()
            return True
        served.body = answers[served.host]
        writer.write(served.body)
        await writer.drain()
        return False  # the close ends the body

    with ShapeServer() as server:
        results = _fetch_sites(server, plans, site)
    for host, lines in zip(plans, lists):
        mine = {_path(r.url): r for r in results if f"//{host}:" in r.url}
        bad, after = mine["/bad"], mine["/page-b"]
        assert bad.outcome == "error" and error_kind(bad.error) == "bad_response", (lines, bad.raw_body, bad.error)
        assert after.outcome == "fetched" and after.body == f"page /page-b of {host}".encode()


# --- Transfer-Encoding in an HTTP/1.0 answer ---------------------------------------------


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    answers=st.lists(
        st.tuples(
            st.sampled_from([b"chunked", b"Chunked", b"gzip, chunked"]),
            st.sampled_from([b"keep-alive", b"Keep-Alive", b"keep-alive, x"]),
            st.binary(max_size=100),
            st.booleans(),  # Content-Type before or after the framing fields
        ),
        min_size=1,
        max_size=4,
    )
)
def test_an_http_1_0_answer_with_a_transfer_coding_closes_its_connection(answers):
    """An HTTP/1.0 message with Transfer-Encoding: its sender may not have framed it as it
    says (Transfer-Encoding came with HTTP/1.1; a 1.0 hop forwards chunks it does not
    know), so a client MUST close the connection after it (RFC 9112 §6.1: "the message
    sender might have retained a portion of the message ... that could be misinterpreted by
    further use of the connection"). Sent with Connection: keep-alive, the connection was
    pooled and the host's next request went out on it. The next request goes out on a new
    connection, and its answer is its own."""
    plans: dict[str, list[str]] = {}
    bodies: dict[str, bytes] = {}
    for i, (coding, keep, body, order) in enumerate(answers):
        sent = gzip.compress(body) if coding.startswith(b"gzip") else body
        fields = [b"Connection: " + keep, b"Transfer-Encoding: " + coding]
        fields.insert(0 if order else 2, b"Content-Type: text/html")
        bodies[f"ten{i}.test"] = (
            b"HTTP/1.0 200 OK\r\n" + b"".join(f + b"\r\n" for f in fields) + b"\r\n"
            + (b"%x\r\n%s\r\n" % (len(sent), sent) if sent else b"") + b"0\r\n\r\n"
        )  # fmt: skip
        plans[f"ten{i}.test"] = ["/one", "/two"]

    async def site(served, writer):
        served.body = bodies[served.host] if served.path == "/one" else response(f"page {served.host}".encode())
        writer.write(served.body)
        await writer.drain()
        return True  # kept open, as the answer says

    with ShapeServer() as server:
        results = _fetch_sites(server, plans, site)
        conns = {(r.host, r.path): r.conn for r in server.requests}
    for host, (_, _, body, _) in zip(plans, answers):
        mine = {_path(r.url): r for r in results if f"//{host}:" in r.url}
        assert mine["/one"].outcome == "fetched" and mine["/one"].body == body, mine["/one"].error
        assert mine["/two"].outcome == "fetched" and mine["/two"].body == f"page {host}".encode()
        assert conns[(host, "/two")] != conns[(host, "/one")], host
