"""freshness.measure on hand-built request logs with known answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from beamcrawl.simweb.freshness_audit import main, measure, measure_from_files, page_freshness, truth_pages
from beamcrawl.simweb.site import SimWeb
from beamcrawl.simweb.truth import web_truth, write_truth

EPOCH = 2_000_000_000.0
PORT = 8123


@pytest.fixture(scope="module")
def web() -> SimWeb:
    return SimWeb(6, seed=9, pages_per_host=12, port=PORT, change_scale=1.0, epoch=EPOCH)


def _page(web: SimWeb, cls: str, min_changes: int = 0) -> tuple[int, str, list[float]]:
    for hi in range(web.hosts):
        for j in range(web.pages_per_host):
            path = web.page_path(hi, j)
            if web.change_class(hi, path) == cls:
                times = web.change_times(hi, path, EPOCH + 1000)
                if len(times) >= min_changes:
                    return hi, path, times
    raise AssertionError(cls)


def req(
    web: SimWeb,
    hi: int,
    path: str,
    t: float,
    status: int = 200,
    version: int | None = None,
    ua: str = "Mozilla/5.0 (compatible; BeamCrawl/0.1)",
    **extra: Any,
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "start": t - 0.01,
        "end": t,
        "host": web.names[hi],
        "path": path,
        "ua": ua,
        "status": status,
        "bytes": 100,
        "method": "GET",
    }
    if version is not None:
        rec["version"] = version
    rec.update(extra)
    return rec


def test_page_freshness_arithmetic() -> None:
    changes = [10.0, 20.0]
    # Fresh on [5, 10) (v0) and [15, 20) (v1); from 25 the copy is v1 but the page is v2.
    assert page_freshness(changes, [(5.0, 0), (15.0, 1), (25.0, 1)], 0.0, 30.0) == pytest.approx(10.0)
    # A fetch before the window sets the starting copy; one after it does not count.
    assert page_freshness(changes, [(-3.0, 0), (35.0, 2)], 0.0, 30.0) == pytest.approx(10.0)
    assert page_freshness(changes, [], 0.0, 30.0) == 0.0
    assert page_freshness([], [(0.0, 0)], 0.0, 30.0) == pytest.approx(30.0)
    # Order of the fetch list does not matter; a fetch exactly at a change sees the new version.
    assert page_freshness(changes, [(20.0, 2), (10.0, 1)], 0.0, 30.0) == pytest.approx(20.0)


def test_one_page_with_known_changes_200_and_304(web: SimWeb) -> None:
    hi, path, times = _page(web, "fast", min_changes=4)
    c1, c2, c3 = times[:3]
    url = web.url(hi, path)
    start, end = EPOCH, c3 + 0.5 * (times[3] - c3)
    f0 = EPOCH + 0.25 * (c1 - EPOCH)  # 200 of version 0: fresh until c1
    f1 = c1 + 0.5 * (c2 - c1)  # 200 of version 1: fresh until c2
    f2 = c2 + 0.3 * (c3 - c2)  # 304 while version 2: fresh until c3
    log = [
        req(web, hi, path, f0, 200, 0),
        req(web, hi, path, f1, 200, 1),
        req(web, hi, path, f2, 304, 2),
        req(web, hi, path, f2 + 1e-4, 500),  # an error leaves the copy as it was
        req(web, hi, "/robots.txt", f0 - 0.1, 200),
    ]
    report = measure(log, web, "beamcrawl", start, end, pages={url})
    expected = ((c1 - f0) + (c2 - f1) + (c3 - f2)) / (end - start)
    assert report.by_page[url].freshness == pytest.approx(expected, abs=1e-9)
    assert report.mean == pytest.approx(expected, abs=1e-9)
    assert report.by_class == {"fast": pytest.approx(expected, abs=1e-9)}
    assert (report.fetches_200, report.fetches_304, report.fetched_pages, report.pages) == (2, 1, 1, 1)
    assert report.requests == 5
    page = report.by_page[url]
    assert (page.fetches_200, page.fetches_304, page.first_fetch, page.changes) == (2, 1, f0, 3)
    assert "freshness[beamcrawl]" in report.summary() and "fast=" in report.summary()
    json.dumps(report.to_dict())

    # A 304 without a logged version counts as the version live at its time.
    log[2] = req(web, hi, path, f2, 304)
    assert measure(log, web, "beamcrawl", start, end, {url}).mean == pytest.approx(expected, abs=1e-9)
    # A 200 without a version: the version live at the request's start.
    log[1] = req(web, hi, path, f1, 200)
    assert measure(log, web, "beamcrawl", start, end, {url}).mean == pytest.approx(expected, abs=1e-9)
    # A 200 that served an old version (a stale cache, say) is stale from the start.
    log[1] = req(web, hi, path, f1, 200, 0)
    stale = ((c1 - f0) + (c3 - f2)) / (end - start)
    assert measure(log, web, "beamcrawl", start, end, {url}).mean == pytest.approx(stale, abs=1e-9)


def test_user_agent_filter_and_two_crawlers_side_by_side(web: SimWeb) -> None:
    hi, path, times = _page(web, "medium", min_changes=2)
    url = web.url(hi, path)
    c1, c2 = times[:2]
    start, end = EPOCH, c2
    fa, fb = EPOCH + 0.5 * (c1 - EPOCH), c1 + 0.5 * (c2 - c1)
    a = req(web, hi, path, fa, 200, 0, ua="Mozilla/5.0 (compatible; beamcrawl/0.1)")
    b = req(web, hi, path, fb, 200, 1, ua="SimpleCrawler/2.0 (+http://example.test)")
    head = req(web, hi, path, EPOCH + 0.1 * (c1 - EPOCH), 200, 0, ua="simplecrawler/2.0", method="HEAD")
    broken = req(
        web, hi, path, EPOCH + 0.2 * (c1 - EPOCH), 200, 0, ua="simplecrawler/2.0", error="ConnectionResetError"
    )
    log = [head, broken, a, b]
    ra = measure(log, web, "BeamCrawl", start, end, {url})
    rb = measure(log, web, "simplecrawler", start, end, {url})
    assert ra.mean == pytest.approx((c1 - fa) / (end - start))
    assert rb.mean == pytest.approx((c2 - fb) / (end - start))
    # HEAD and a response cut short count as requests, not fetches.
    assert (ra.requests, rb.requests, ra.fetches_200, rb.fetches_200) == (1, 3, 1, 1)
    assert measure(log, web, "nobody", start, end, {url}).fetched_pages == 0


def test_never_fetched_pages_count_zero_and_default_page_set(web: SimWeb) -> None:
    truth = web_truth(web)
    hi, path, _ = _page(web, "static")
    url = web.url(hi, path)
    end = EPOCH + 100.0
    log = [req(web, hi, path, EPOCH + 25.0, 200, 0)]
    report = measure(log, truth, "beamcrawl", EPOCH, end)
    default = truth_pages(truth)
    assert set(report.by_page) == default
    assert all("?" not in u and "/robots.txt" not in u for u in default)
    assert any("/s/" in u for u in default)  # sitemap-only pages are measured
    assert not any(u.endswith((".pdf", ".xml", ".gz", ".rss", ".atom")) for u in default)
    assert report.by_page[url].freshness == pytest.approx(0.75)
    assert all(p.freshness == 0.0 for u, p in report.by_page.items() if u != url)
    assert report.mean == pytest.approx(0.75 / len(default))
    assert report.fetched_pages == 1 and report.pages == len(default)
    assert sum(report.pages_by_class.values()) == len(default)
    assert report.by_class["static"] == pytest.approx(0.75 / report.pages_by_class["static"])
    # The SimWeb itself gives the same answer as its truth.
    assert measure(log, web, "beamcrawl", EPOCH, end).by_page.keys() == report.by_page.keys()
    assert measure(log, web, "beamcrawl", EPOCH, end).mean == pytest.approx(report.mean)
    # Narrowing helpers.
    allowed = truth_pages(truth, allowed_only=True)
    assert allowed < default
    assert truth_pages(truth, sitemap_only=True) == {
        rec["origin"] + p for rec in truth.values() for p in rec["sitemap_only"]
    }
    assert all(
        truth[h]["pages"][u[len(truth[h]["origin"]) :]]["change_class"] == "fast"
        for u in truth_pages(truth, classes=["fast"])
        for h in [u.split("/")[2].split(":")[0]]
    )


def test_errors(web: SimWeb) -> None:
    with pytest.raises(ValueError):
        measure([], web, "x", EPOCH, EPOCH)
    with pytest.raises(ValueError):
        measure([], web, "x", EPOCH, EPOCH + 1, {web.url(0, "/robots.txt")})
    with pytest.raises(ValueError):
        measure([], SimWeb(2, port=PORT), "x", EPOCH, EPOCH + 1)
    with pytest.raises(ValueError):
        measure([], web_truth(SimWeb(2, port=PORT)), "x", EPOCH, EPOCH + 1)


def test_measure_from_files(web: SimWeb, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    truth_path = tmp_path / "truth.jsonl"
    log_path = tmp_path / "log.jsonl"
    write_truth(web, truth_path)
    hi, path, times = _page(web, "slow", min_changes=1)
    url = web.url(hi, path)
    header = {"simweb_log_header": 1, "epoch": EPOCH, "change_scale": 1.0}
    lines = [header, req(web, hi, path, EPOCH + 2.0, 200, 0)]
    log_path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    end = times[0] + 5.0
    report = measure_from_files(log_path, truth_path, "beamcrawl", EPOCH, end)
    assert report.by_page[url].freshness == pytest.approx((times[0] - (EPOCH + 2.0)) / (end - EPOCH))
    assert report.requests == 1
    args = ["--log", str(log_path), "--truth", str(truth_path), "--token", "beamcrawl"]
    assert main(args + ["--start", str(EPOCH), "--end", str(end), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["by_page"][url]["freshness"] == pytest.approx(report.by_page[url].freshness)
    assert main(args + ["--start", str(EPOCH), "--end", str(end)]) == 0
    assert capsys.readouterr().out.startswith("freshness[beamcrawl]")
    assert main(["--log", str(log_path), "--truth", str(truth_path), "--token", "nobody"]) == 1
