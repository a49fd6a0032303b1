"""The freshness pieces against the running simweb, over HTTP: validators echoed as a
conditional GET get a 304, the changing /news.html is seen to change, and robots.txt's
Sitemap: line leads to a sitemap that parses to the simweb's truth."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence

import pytest

from beamcrawl.core.net import conditional
from beamcrawl.core.policy import change_rate as freshness
from beamcrawl.core.content import sitemaps
from beamcrawl.core.content.htmlparse import checksum
from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.simweb.testing import SimwebHandle, running_simweb

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimwebHandle]:
    with running_simweb(
        tmp_path_factory.mktemp("freshness-simweb"), hosts=24, pages_per_host=30, latency_scale=0
    ) as sw:
        yield sw


def get(
    sw: SimwebHandle, host: str, path: str, headers: Sequence[tuple[str, str]] = ()
) -> tuple[int, list[tuple[str, str]], bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{sw.port}{path}", headers={"Host": f"{host}:{sw.port}", **dict(headers)}
    )
    try:
        with _OPENER.open(request, timeout=10) as resp:
            return resp.status, list(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as err:  # 304, 404 ... are answers, not failures here
        return err.code, list(err.headers.items()), err.read()


def _host(sw: SimwebHandle, want: str) -> str:
    for host, record in sw.truth().items():
        if want == "sitemap" and record["robots"]["sitemaps"]:
            return host
        if want == "changing" and record["changing"]:
            return host
        if want == "plain":
            return host
    pytest.skip(f"no {want} host in this simweb")


def _outcome(
    status: int, headers: list[tuple[str, str]], body: bytes, sent: Sequence[tuple[str, str]], now: float
) -> freshness.FetchOutcome:
    v = conditional.validators_from_headers(headers, now)
    return freshness.FetchOutcome(
        status,
        checksum=checksum(body) if 200 <= status < 300 else None,
        etag=v.etag,
        last_modified=v.last_modified,
        conditional=conditional.is_conditional(sent),
    )


def test_conditional_get_gets_304_and_counts_as_unchanged(web: SimwebHandle):
    host = _host(web, "plain")
    now = 1_800_000_000.0
    status, headers, body = get(web, host, "/")
    assert status == 200
    state, first = freshness.after_fetch(
        freshness.RevisitState(importance=1.0), _outcome(status, headers, body, [], now), now
    )
    assert first.observed == "first" and state.etag and state.last_modified

    sent = conditional.conditional_headers(state.etag, state.last_modified)
    assert [name for name, _ in sent] == ["If-None-Match", "If-Modified-Since"]
    status, headers, body = get(web, host, "/", sent)
    assert status == 304 and body == b""
    assert conditional.classify_not_modified(status, sent) == "not_modified"
    later = now + freshness.DAY
    state, second = freshness.after_fetch(state, _outcome(status, headers, body, sent, later), later)
    assert second.observed == "unchanged" and second.keep_copy and state.outcomes == "FN"

    # Either validator alone is enough for this server.
    for only in (sent[:1], sent[1:]):
        assert get(web, host, "/", only)[0] == 304
    assert get(web, host, "/", [("If-None-Match", '"something-else"')])[0] == 200


def test_changing_page_is_seen_to_change(web: SimwebHandle):
    host = _host(web, "changing")
    state, t = freshness.RevisitState(importance=0.8), 1_800_000_000.0
    seen = []
    for _ in range(4):
        status, headers, body = get(web, host, "/news.html")
        assert status == 200
        state, decision = freshness.after_fetch(state, _outcome(status, headers, body, [], t), t)
        seen.append(decision.observed)
        t += freshness.HOUR
    assert seen == ["first", "changed", "changed", "changed"]
    assert state.changes == 3 and state.lam > freshness.DEFAULT_MODEL.prior_rate * 10
    assert state.next_due - (t - freshness.HOUR) < freshness.DAY  # revisited within a day


def test_robots_sitemap_line_to_sitemap_urls(web: SimwebHandle):
    host = _host(web, "sitemap")
    status, _, body = get(web, host, "/robots.txt")
    (sitemap_url,) = RobotsRules.parse(body, "beamcrawl", status).sitemaps()
    assert sitemap_url == web.url(host, "/sitemap.xml")
    status, _, body = get(web, host, "/sitemap.xml")
    assert status == 200
    doc = sitemaps.parse(body, sitemap_url, robots_origins=(f"http://{host}:{web.port}",))
    assert doc.kind == "urlset" and doc.error is None
    assert [e.url for e in doc.urls] == web.truth()[host]["pages"]["/sitemap.xml"]["links"]
