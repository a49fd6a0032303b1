"""``beamcrawl submit``, run as the real command against an embedded store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.policy.change_rate import SUBMIT_PRIORITY
from beamcrawl.cli.submit import SubmitError, SubmitRequest
from beamcrawl.schemas.records import FrontierEntry, UrlState
from beamcrawl.stores.base import Mutation, open_store

REPO = Path(__file__).resolve().parents[2]


def run_submit(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.submit", *args],
        cwd=REPO,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.fixture
def crawl_dir(tmp_path: Path) -> Path:
    """A crawl's output folder with an (empty) embedded store, as `beamcrawl crawl` leaves it."""
    out = tmp_path / "crawl"
    open_store(f"sqlite://{out}/store.sqlite").close()
    return out


def frontier(out: Path) -> list[FrontierEntry]:
    with open_store(f"sqlite://{out}/store.sqlite") as store:
        return [FrontierEntry.from_cells(cells) for _, cells in store.read_range("frontier")]


def seen(out: Path) -> list[UrlState]:
    with open_store(f"sqlite://{out}/store.sqlite") as store:
        return [UrlState.from_cells(cells) for _, cells in store.read_range("urls")]


def test_submit_queues_counts_duplicates_and_rejects(crawl_dir: Path):
    proc = run_submit(
        "https://news.example.in/sitemap-news.xml",
        "https://shop.example.com/",
        "HTTPS://SHOP.example.com:443/#top",  # the same URL, spelled differently
        "ftp://files.example.com/",
        "--priority",
        "high",
        "--reason",
        "sitemap_lastmod",
        "--crawl",
        str(crawl_dir),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        '{"accepted": 2, "duplicates": 1, "rejected": '
        '[{"url": "ftp://files.example.com/", "reason": "unsupported scheme \'ftp\'"}]}\n'
    )
    rows = frontier(crawl_dir)
    assert sorted(r.url for r in rows) == ["https://news.example.in/sitemap-news.xml", "https://shop.example.com/"]
    assert {(r.priority, r.source, r.depth) for r in rows} == {(SUBMIT_PRIORITY["high"], "submit", 0)}
    # Queued before seen, and both written.
    assert sorted(s.url for s in seen(crawl_dir)) == sorted(r.url for r in rows)

    # Again, with --store naming the folder: everything is known now.
    again = run_submit("https://shop.example.com/", "--priority", "low", "--reason", "again", "--store", str(crawl_dir))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"accepted": 0, "duplicates": 1, "rejected": []}
    assert len(frontier(crawl_dir)) == 2


def test_submit_from_files_and_stdin(crawl_dir: Path, tmp_path: Path):
    listing = tmp_path / "urls.txt"
    listing.write_text(
        "# seeds for the spring crawl\n\nhttps://a.example/\n  https://b.example/page  \nnot a url\nhttps://a.example/\n",
        encoding="utf-8",
    )
    proc = run_submit(
        "https://c.example/",
        "--file",
        str(listing),
        "--file",
        "-",
        "--priority",
        "normal",
        "--reason",
        "spring seeds",
        "--store",
        f"sqlite://{crawl_dir}/store.sqlite",
        stdin="https://d.example/feed.xml\n",
    )
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["accepted"] == 4 and answer["duplicates"] == 1
    assert answer["rejected"] == [{"url": "not a url", "reason": "missing scheme"}]
    assert {r.priority for r in frontier(crawl_dir)} == {SUBMIT_PRIORITY["normal"]}


@pytest.mark.parametrize(
    "args, message",
    [
        (["https://a.example/", "--priority", "urgent", "--reason", "x"], "priority must be one of high, normal, low"),
        (["https://a.example/", "--priority", "high"], "the following arguments are required: --reason"),
        (["https://a.example/", "--priority", "high", "--reason", "  "], "--reason must not be empty"),
        (["https://a.example/", "--priority", "high", "--reason", "x" * 201], "longer than 200"),
        (["--priority", "high", "--reason", "x"], "no URLs given"),
        (
            ["--file", "/nonexistent/urls.txt", "--priority", "high", "--reason", "x"],
            "file not found: /nonexistent/urls.txt",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(crawl_dir: Path, args: list[str], message: str):
    proc = run_submit(*args, "--crawl", str(crawl_dir))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert frontier(crawl_dir) == []


def test_store_and_crawl_are_exclusive_and_one_is_required(crawl_dir: Path):
    both = run_submit(
        "https://a.example/",
        "--priority",
        "high",
        "--reason",
        "x",
        "--crawl",
        str(crawl_dir),
        "--store",
        str(crawl_dir),
    )
    neither = run_submit("https://a.example/", "--priority", "high", "--reason", "x")
    assert both.returncode == neither.returncode == 2
    assert "not allowed with" in both.stderr and "--store --crawl" in neither.stderr.replace("(", "").replace(
        ")", ""
    ).replace(" |", "")


def test_unreachable_store_is_one_line_and_exit_1(tmp_path: Path):
    missing = run_submit(
        "https://a.example/", "--priority", "high", "--reason", "x", "--crawl", str(tmp_path / "nowhere")
    )
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert "no crawl store at" in missing.stderr
    assert not (tmp_path / "nowhere").exists()  # a typo does not create an empty crawl

    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    bad = run_submit("https://a.example/", "--priority", "high", "--reason", "x", "--store", str(junk))
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
    assert "not a SQLite database" in bad.stderr


def test_control_api_body():
    req = SubmitRequest.from_json({"urls": ["https://a.example/"], "priority": "high", "reason": "sitemap_lastmod"})
    assert req == SubmitRequest(("https://a.example/",), "high", "sitemap_lastmod")
    with pytest.raises(SubmitError, match="urls must be a list"):
        SubmitRequest.from_json({"urls": "https://a.example/", "priority": "high", "reason": "x"})
    with pytest.raises(SubmitError, match="priority must be one of"):
        SubmitRequest.from_json({"urls": [], "priority": "asap", "reason": "x"})
    with pytest.raises(SubmitError, match="one line"):
        SubmitRequest.from_json({"urls": [], "priority": "low", "reason": "a\nb"})


def test_reason_and_kind_are_kept_and_high_requeues_a_known_url_with_its_validators(crawl_dir: Path):
    from beamcrawl.schemas.records import fp_key, frontier_key

    first = run_submit("https://a.example/sitemap.xml.gz", "https://a.example/page", "--priority", "normal",
                       "--reason", "new site", "--crawl", str(crawl_dir))  # fmt: skip
    assert first.returncode == 0, first.stderr
    rows = {r.url: r for r in frontier(crawl_dir)}
    assert rows["https://a.example/sitemap.xml.gz"].kind == "sitemap" and rows["https://a.example/page"].kind == "page"
    assert {r.reason for r in rows.values()} == {"new site"}
    assert {s.reason for s in seen(crawl_dir)} == {"new site"}

    # The page is fetched and scheduled: its state holds validators and its next visit.
    page = rows["https://a.example/page"]
    scheduled = frontier_key(9_000_000_000_000, page.fp)
    state = {"etag": '"v7"', "visits": 3, "next_due": 9_000_000_000.0}
    with open_store(f"sqlite://{crawl_dir}/store.sqlite") as store:
        store.mutate("frontier", [Mutation.delete_row(page.key)])
        store.mutate(
            "urls", [Mutation.set(fp_key(page.fp), {"u:revisit": json.dumps(state).encode(), "u:state": b'"fetched"'})]
        )

    low = run_submit("https://a.example/page", "--priority", "low", "--reason", "meh", "--crawl", str(crawl_dir))
    assert json.loads(low.stdout)["duplicates"] == 1  # known, and not urgent: left to its schedule
    urgent = run_submit(
        "https://a.example/page", "--priority", "high", "--reason", "press release", "--crawl", str(crawl_dir)
    )
    assert json.loads(urgent.stdout) == {"accepted": 1, "duplicates": 0, "rejected": []}
    (again,) = [r for r in frontier(crawl_dir) if r.url == "https://a.example/page"]
    assert again.priority == SUBMIT_PRIORITY["high"] and again.reason == "press release"
    assert again.revisit == state  # fetched conditionally, with what the crawl knows
    assert again.also_keys == [scheduled.hex()]  # and its scheduled visit goes when this one is done


# --- issue #27 item 10: names that are loopback by definition -----------------------------------


def test_localhost_is_refused_like_a_loopback_address_without_the_flag(crawl_dir: Path):
    urls = (
        "http://localhost:18811/",
        "http://simweb.localhost/p/1.html",
        "http://LOCALHOST./",
        "http://127.0.0.1:18811/",
    )
    proc = run_submit(*urls, "--priority", "normal", "--reason", "local test", "--crawl", str(crawl_dir))
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["accepted"] == 0 and [r["url"] for r in answer["rejected"]] == list(urls), answer
    assert all(
        r["reason"].startswith("refused: loopback ") and "--allow-private-networks" in r["reason"]
        for r in answer["rejected"]
    ), answer
    assert frontier(crawl_dir) == []
    allowed = run_submit(*urls, "--priority", "normal", "--reason", "local test", "--allow-private-networks",
                         "--crawl", str(crawl_dir))  # fmt: skip
    assert allowed.returncode == 0 and json.loads(allowed.stdout)["accepted"] == 4, allowed.stdout


def test_a_seed_on_localhost_is_refused_without_the_flag(tmp_path: Path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://localhost:18811/\n")
    proc = subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", "crawl", "--seeds", str(seeds), "--out", str(tmp_path / "out"),
         "--rounds", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert proc.returncode != 0
    assert f"{seeds}:1: refused: 'http://localhost:18811/': loopback name localhost" in proc.stderr, proc.stderr[-2000:]


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(
    labels=st.lists(_label, max_size=3),
    spelled=st.sampled_from(["localhost", "LOCALHOST", "LocalHost"]),
    dot=st.booleans(),
    port=st.none() | st.integers(1, 65535),
    other=_label,
)
def test_every_localhost_name_is_refused_and_no_other(labels, spelled, dot, port, other):
    """Generated names: ``localhost`` and any name under it, in any case, with a trailing dot or
    a port, are refused without the flag and allowed with it; a name that only contains the
    word (``localhost.example``, ``mylocalhost``) is left to DNS and the connector."""
    from beamcrawl.core.urls.seedfile import address_refusal
    from beamcrawl.core.urls.urlnorm import normalize

    authority = ".".join([*labels, spelled]) + ("." if dot else "") + (f":{port}" if port else "")
    url = normalize(f"http://{authority}/")
    assert address_refusal(url, allow_private=False).startswith("loopback name ")
    assert address_refusal(url, allow_private=True) is None
    for name in (f"{spelled}.{other}.example", f"{other}localhost", f"localhost-{other}"):
        assert address_refusal(normalize(f"http://{name}/"), allow_private=False) is None, name


@settings(max_examples=30, deadline=None)
@given(hold_s=st.integers(min_value=-3600, max_value=7200))
def test_an_urgent_recrawl_waits_for_a_redirects_retry_after_still_in_force(tmp_path_factory, hold_s):
    """A known URL whose redirect asked to wait (the seen set's ``u:hold``) is queued again
    by hand due when the hold ends, in its held visit's place; a hold already over holds
    nothing."""
    from beamcrawl.pipelines.seeding import submit_urls
    from beamcrawl.schemas.records import fp_key, frontier_key

    now_ms = 1_800_000_000_000
    hold_ms = now_ms + hold_s * 1000
    url = "https://a.example/moved"
    out = tmp_path_factory.mktemp("held")
    with open_store(f"sqlite://{out}/store.sqlite") as store:
        submit_urls(store, [url], now_ms - 60_000, priority=0.5)
        (first,) = [FrontierEntry.from_cells(c) for _, c in store.read_range("frontier")]
        # Its redirect's Retry-After moved its visit to the hold (state/frontier.py hold_visits).
        held = frontier_key(hold_ms, first.fp)
        store.mutate("frontier", [Mutation.delete_row(first.key)])
        store.mutate("frontier", [Mutation.set(held, first.to_cells())])
        store.mutate("urls", [Mutation.set(fp_key(first.fp), {"u:hold": str(hold_ms).encode()})])
        report = submit_urls(store, [url], now_ms, reason="press release", requeue_known=True)
        rows = [(k, FrontierEntry.from_cells(c)) for k, c in store.read_range("frontier")]
    assert report.accepted == 1
    urgent = [e for _, e in rows if e.reason == "press release"]
    assert len(urgent) == 1 and urgent[0].due_ms == max(now_ms, hold_ms)
    if hold_ms > now_ms:
        assert [k for k, _ in rows] == [held]  # the held visit is this one: no visit before the hold
