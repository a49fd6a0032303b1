"""End to end, store once: crawl a simweb full of copies for three rounds through the real CLI,
then check the WARC files, the page events and the crawl state against simweb's truth.

Every host from the first on may be a mirror (its original's pages byte for byte), a
near-copy host (its original's pages with their own timestamp, reader counter and ad slot)
or a template host (one news template around different articles: look-alikes, not copies).
Every host's root is a seed, so originals and copies meet in one round, and pages linked
from them in the next ones, against what earlier rounds kept. Three short rounds rather than
two: a copy's links are not followed, so copy hosts' inner pages are reached only through
other hosts' links, and the third round brings the near copies checked to over a hundred
(the precision and recall below are measured on them; about 25 s in all).

What is checked:

- ``warcio check`` passes on every WARC file, revisit records included;
- every payload (pages, error pages, redirect stubs; not robots.txt) is stored in exactly one response record; each exact
  copy's event points at one revisit record, which refers to a response holding its payload;
- every group of byte-identical pages fetched keeps exactly one original, the others are
  marked ``duplicate_of`` it; near copies are found with precision and recall of at least
  0.95 against the truth (per group of identical pages, as ``bench/simhash_bench.py`` counts);
- a copy's links are not followed: every URL the crawl knows is a seed or a followable link
  of a page that is not a copy, and the URL state records the copies.

All of it twice: the embedded store on the in-process runner, and the Bigtable emulator on
Flink's local mini-cluster (the rounds Flink jobs, their bundles Flink's), so the decisions
hold whatever the runner cuts a round's pages into.
"""

from __future__ import annotations

import collections
import glob
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urljoin, urlsplit

import pyarrow.parquet as pq
import pytest
from crawl_setups import crawl_store, runner_args
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.urls.urlnorm import normalize
from beamcrawl.core.archive.warc_revisit import REVISIT_PROFILE_1_1
from beamcrawl.schemas.records import FrontierEntry, UrlState
from beamcrawl.simweb.testing import running_simweb
from beamcrawl.stores.base import open_store
from beamcrawl.transforms.record import DUPLICATE_CELL

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # whole crawls: `pytest -m "not slow and not e2e"` leaves it out

HOSTS = 60
PAGES = 20
MIN_DELAY = 0.25
WARCIO = str(Path(sys.executable).with_name("warcio"))


@dataclass
class Crawl:
    out: Path
    truth: dict[str, dict[str, Any]]
    seeds: list[str]
    events: list[dict[str, Any]]
    links: list[dict[str, Any]]
    urls: dict[str, dict[str, bytes]]  # the seen set: url -> cells
    frontier: list[str]
    reports: list[dict[str, Any]]


@pytest.fixture(scope="module", params=["embedded", "flink-bigtable"])
def crawl(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawl]:
    work = tmp_path_factory.mktemp(f"dedup-{request.param}")
    out = work / "out"
    with crawl_store(request, request.param, out) as store:
        yield _crawl(work, out, store, runner_args(request.param))


def _crawl(work: Path, out: Path, store: str, runner: list[str]) -> Crawl:
    with running_simweb(str(work), hosts=HOSTS, seed=5, pages_per_host=PAGES, copy_hosts_from=0) as web:
        seeds = [web.base_url(h) for h in web.hosts]
        (work / "seeds.txt").write_text("\n".join(seeds) + "\n")
        cmd = [
            sys.executable, "-m", "beamcrawl.cli.main", "crawl",
            "--seeds", str(work / "seeds.txt"), "--out", str(out), "--store", store, "--rounds", "3",
            "--resolve", "*=127.0.0.1", "--allow-private-networks",
            "--min-delay", str(MIN_DELAY), "--round-window", "6", *runner,
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        truth = web.truth()
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open_store(store) as s:
        urls = {}
        for _, cells in s.read_range("urls"):
            urls[UrlState.from_cells(cells).url] = cells
        frontier = [FrontierEntry.from_cells(cells).url for _, cells in s.read_range("frontier")]
    return Crawl(
        out=out,
        truth=truth,
        seeds=[normalize(u) for u in seeds],
        events=_rows(out, "pages"),
        links=_rows(out, "links"),
        urls=urls,
        frontier=frontier,
        reports=[json.loads(Path(p).read_text()) for p in sorted(glob.glob(str(out / "reports" / "round-*.json")))],
    )


def _rows(out: Path, kind: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(glob.glob(str(out / kind / "round=*" / "*.parquet"))):
        round_no = int(Path(path).parent.name.split("=", 1)[1])
        rows.extend({**row, "round": round_no} for row in pq.read_table(path).to_pylist())
    return rows


def _warcs(out: Path) -> list[str]:
    return sorted(glob.glob(str(out / "warc" / "round=*" / "*.warc.gz")))


def _pages(c: Crawl) -> list[dict[str, Any]]:
    """Fetch events of 2xx responses with a payload (robots.txt aside): the pages checked."""
    return [
        e for e in c.events
        if e["outcome"] == "fetched" and 200 <= e["status"] < 300 and e["content_length"] and e["source"] != "robots"
    ]  # fmt: skip


# --- the WARC files ------------------------------------------------------------------------


def test_every_warc_passes_warcio_check(crawl: Crawl):
    paths = _warcs(crawl.out)
    assert paths
    check = subprocess.run([WARCIO, "check", "-v", *paths], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert "digest present but not checked (revisit)" in check.stdout  # the revisits are there


def test_each_payload_is_stored_once_and_each_exact_copy_is_one_revisit(crawl: Crawl):
    responses: dict[str, list[str]] = collections.defaultdict(list)  # payload digest -> URLs
    response_at: dict[str, tuple[str, str]] = {}  # url -> (payload digest, WARC-Date)
    revisits: dict[tuple[str, int], Any] = {}  # (file relative to OUT, offset) -> headers
    # robots.txt files are rules, not pages: their bodies are not checked for copies.
    robots = {e["url"] for e in crawl.events if e["source"] == "robots"}
    for path in _warcs(crawl.out):
        rel = str(Path(path).relative_to(crawl.out))
        with open(path, "rb") as fh:
            it = ArchiveIterator(fh)
            for record in it:
                h = record.rec_headers
                if record.rec_type == "response":
                    payload = record.content_stream().read()
                    digest = h.get_header("WARC-Payload-Digest")
                    url = h.get_header("WARC-Target-URI")
                    response_at[url] = (digest, h.get_header("WARC-Date"))
                    if payload and url not in robots:  # pages, error pages and redirect stubs alike
                        responses[digest].append(url)
                elif record.rec_type == "revisit":
                    revisits[(rel, it.get_record_offset())] = h
    twice = {d: urls for d, urls in responses.items() if len(urls) > 1}
    assert twice == {}, list(twice.items())[:5]

    exact = [e for e in crawl.events if e["duplicate_kind"] == "exact"]
    assert exact and len(revisits) == len(exact)
    for event in exact:
        rel, offset = event["blob"].rsplit("@", 1)
        h = revisits[(rel, int(offset))]  # the blob points at the copy's revisit record
        assert h.get_header("WARC-Target-URI") == event["url"]
        assert h.get_header("WARC-Profile") == REVISIT_PROFILE_1_1
        original = h.get_header("WARC-Refers-To-Target-URI")
        assert original == event["duplicate_of"]
        # The original's response holds the payload, with the date the revisit names.
        assert response_at[original] == (h.get_header("WARC-Payload-Digest"), h.get_header("WARC-Refers-To-Date"))
    near = [e for e in crawl.events if e["duplicate_kind"] == "near"]
    assert near and all(e["blob"] is None for e in near)  # not stored again
    assert not any(url in response_at for url in (e["url"] for e in near))


# --- the decisions against the truth ------------------------------------------------------


def test_every_byte_identical_copy_is_caught(crawl: Crawl):
    pages = _pages(crawl)
    by_url = {e["url"]: e for e in pages}
    groups: dict[str, list[str]] = collections.defaultdict(list)
    for e in pages:
        groups[e["checksum"]].append(e["url"])
    copies = [urls for urls in groups.values() if len(urls) > 1]
    assert len(copies) > 20
    for urls in copies:
        unmarked = [u for u in urls if by_url[u]["duplicate_of"] is None]
        assert len(unmarked) <= 1, urls  # one original (none: the bytes are a near copy)
    # Every one of the truth's exact copies that was fetched with its original is marked.
    truth_exact = 0
    for url, entry in _truth_pages(crawl.truth).items():
        if url in by_url and entry["duplicate_of"]:
            target = urljoin(url, entry["duplicate_of"])
            if target in by_url:
                truth_exact += 1
                assert by_url[url]["duplicate_of"] or by_url[target]["duplicate_of"], (url, target)
    assert truth_exact > 10
    for e in pages:
        if e["duplicate_kind"] == "exact":
            assert by_url[e["duplicate_of"]]["checksum"] == e["checksum"]


def test_near_copy_precision_and_recall(crawl: Crawl):
    truth = _truth_pages(crawl.truth)
    pages = [e for e in _pages(crawl) if e["url"] in truth]
    by_url = {e["url"]: e for e in pages}

    def root(url: str) -> str:
        seen = set()
        while url not in seen:
            seen.add(url)
            entry = truth[url]
            pointer = entry["duplicate_of"] or entry["near_duplicate_of"]
            if not pointer:
                break
            url = urljoin(url, pointer)
        return url

    groups: dict[str, list[str]] = collections.defaultdict(list)  # checksum -> URLs
    for e in pages:
        groups[e["checksum"]].append(e["url"])
    cluster = {check: root(urls[0]) for check, urls in groups.items()}
    for check, urls in groups.items():  # the truth agrees with the bytes
        assert {root(u) for u in urls} == {cluster[check]}, urls
    decision: dict[str, str | None] = {}  # per group: the page it was marked a near copy of
    for check, urls in groups.items():
        near = sorted(by_url[u]["duplicate_of"] for u in urls if by_url[u]["duplicate_kind"] == "near")
        decision[check] = near[0] if near else None
    members: dict[str, list[str]] = collections.defaultdict(list)
    for check in groups:
        members[cluster[check]].append(check)
    expected = sum(len(m) - 1 for m in members.values())
    tp = fp = 0
    for check, target in decision.items():
        if target is None:
            continue
        target_check = by_url[target]["checksum"] if target in by_url else None
        if target_check is not None and cluster[target_check] == cluster[check]:
            tp += 1
        else:
            fp += 1
    precision, recall = tp / max(1, tp + fp), tp / max(1, expected)
    print(f"near copies: {expected} expected, TP {tp}, FP {fp}, precision {precision:.3f}, recall {recall:.3f}")
    assert expected >= 10
    assert precision >= 0.95 and recall >= 0.95, (tp, fp, expected)


def _truth_pages(truth: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every page (a 200 with a kind) of the truth, by absolute URL."""
    out = {}
    for rec in truth.values():
        for target, entry in rec["pages"].items():
            if entry["status"] == 200 and "kind" in entry:
                out[normalize(rec["origin"] + target)] = entry
    return out


# --- links and state ------------------------------------------------------------------------


def test_links_of_copies_are_not_followed(crawl: Crawl):
    copies = {e["url"] for e in crawl.events if e["duplicate_of"]}
    followable = set(crawl.seeds)
    only_from_copies = set()
    for link in crawl.links:
        if link["nofollow"] or link["kind"] == "canonical":
            continue
        if link["src"] in copies:
            only_from_copies.add(link["dst"])
        else:
            followable.add(link["dst"])
    only_from_copies -= followable
    known = set(crawl.urls) | set(crawl.frontier)
    assert only_from_copies, "no copy links anything that is not reachable otherwise"
    assert known & only_from_copies == set()
    assert known <= followable, sorted(known - followable)[:5]


def test_url_state_records_copies_and_the_report_counts_them(crawl: Crawl):
    for e in _pages(crawl):
        cells = crawl.urls[e["url"]]
        assert json.loads(cells[DUPLICATE_CELL]) == e["duplicate_of"]
    events = crawl.events
    exact = sum(e["duplicate_kind"] == "exact" for e in events)
    near = sum(e["duplicate_kind"] == "near" for e in events)
    assert sum(r["exact_copies"] for r in crawl.reports) == exact
    assert sum(r["near_copies"] for r in crawl.reports) == near
    assert sum(r["warc_revisits"] for r in crawl.reports) == exact
    hosts = {urlsplit(e["url"]).hostname for e in events if e["duplicate_of"]}
    assert len(hosts) > 10


def test_copies_are_found_within_a_round_and_against_earlier_rounds(crawl: Crawl):
    fetched_in = {e["url"]: e["round"] for e in crawl.events if e["outcome"] == "fetched"}
    for kind in ("exact", "near"):
        copies = [e for e in crawl.events if e["duplicate_kind"] == kind]
        same = sum(fetched_in[e["duplicate_of"]] == e["round"] for e in copies)
        earlier = sum(fetched_in[e["duplicate_of"]] < e["round"] for e in copies)
        assert same > 0 and earlier > 0 and same + earlier == len(copies), (kind, same, earlier)
