"""Smoke test of the benchmark's pieces that need no Scrapy: the floor crawler and the harness.

A 20-host simweb, a 4 s window: the floor crawler (two processes) must crawl politely (the
server-side audit finds nothing), the harness must measure it (wall, CPU, RSS over both
processes) and the comparison table must render. About 10 s.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import compare  # noqa: E402
import floor_crawler  # noqa: E402
from harness import (  # noqa: E402
    audit_split,
    free_port,
    requests_between,
    run_measured,
    simweb_on_port,
    weigh_cpu,
)

from beamcrawl import DEFAULT_USER_AGENT, PRODUCT_TOKEN  # noqa: E402
from beamcrawl.simweb.names import host_names  # noqa: E402

HOSTS = 20
WINDOW = 4.0
DELAY = 0.5


@pytest.mark.e2e  # runs a crawler process for its whole window
def test_floor_crawler_is_polite_and_measured(tmp_path: Path) -> None:
    port = free_port()
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://{h}:{port}/\n" for h in host_names(HOSTS, 1)))
    with simweb_on_port(tmp_path, port, hosts=HOSTS, seed=1, pages_per_host=10_000, log_name="floor.jsonl") as web:
        m = run_measured(
            "floor",
            [
                sys.executable,
                str(BENCH / "floor_crawler.py"),
                "--seeds",
                str(seeds),
                "--window",
                str(WINDOW),
                "--delay",
                str(DELAY),
                "--processes",
                "2",
                "--user-agent",
                DEFAULT_USER_AGENT,
                "--stats-out",
                str(tmp_path / "stats.json"),
            ],
            log_dir=tmp_path,
            timeout=60,
            server_pid=web.process.pid,
        )
        requests = web.requests()
        truth = web.truth()
    assert m.returncode == 0, (tmp_path / "floor.stderr").read_text()
    assert not m.timed_out
    assert m.processes >= 2 and m.cpu > 0 and m.peak_rss > 0
    # The peak's make-up: every process seen, its RSS in the peak's sample summing to the
    # sampled peak, and no process's own peak below what it held then.
    assert len(m.peak_parts) == m.processes
    assert 0 < sum(at_peak for at_peak, _, _ in m.peak_parts) <= m.peak_rss
    assert all(own >= at_peak for at_peak, own, _ in m.peak_parts)
    assert sum(1 for _, _, command in m.peak_parts if "floor_crawler.py" in command) >= 2
    # A host stops once its next turn would fall after the window, so the crawl may end up to
    # one delay early (it stops by itself: not timed out, above).
    assert m.wall >= WINDOW - 2 * DELAY
    own = [r for r in requests if PRODUCT_TOKEN in r["ua"].lower()]
    # Every host answers robots.txt and its root, and most hosts go on for the window.
    assert len(own) > 3 * HOSTS
    assert len(requests_between(own, m.started, m.ended)) == len(own)
    split = audit_split(own, truth, PRODUCT_TOKEN, DELAY)
    assert split.report.violations == 0, split.report.summary()
    assert split.report.distinct_hosts == HOSTS

    # The machine's speed was sampled about every second through the run, and the run's CPU
    # weighed by it: as many pieces as its CPU over the slowest and the fastest piece allow.
    assert len(m.speed_pieces) >= int(m.wall) - 2
    assert m.cpu / max(m.speed_pieces) <= m.weighted_cpu * (1 + 1e-9)
    assert m.weighted_cpu <= m.cpu / min(m.speed_pieces) * (1 + 1e-9)

    row = compare.Row("floor", m)
    compare._fill(row, own, own, truth, DELAY)
    assert row.pages == len(own) and row.pages_per_second > 0
    span, idle, longest = row.pauses
    assert span >= 1 and 0 <= longest <= idle < span
    text = compare.table([row, compare.Row("scrapy", note="not run")])
    assert "| floor |" in text and "not run" in text
    assert "weighed each second" in compare.speed_lines([row])
    assert "floor:" in compare.pause_lines([row])
    assert compare.peak_lines([row]).startswith("- floor: ")


def test_peak_lines_name_each_process_and_its_own_later_peak() -> None:
    m = compare.RunMeasure(
        "beamcrawl",
        [],
        peak_rss=900 * 2**20,
        peak_parts=[
            (780 * 2**20, 800 * 2**20, "/v/bin/python /w/bench/beamcrawl_round.py --out o"),
            (80 * 2**20, 80 * 2**20, "/v/bin/python -m beamcrawl.analysis.charts o"),
            (0, 40 * 2**20, "nice -n 10 /v/bin/python x"),
            (2**20, 2**20 + 2**18, "/v/bin/python -c pass"),  # its own peak rounds to the same MB
        ],
    )
    line = compare.peak_lines([compare.Row("beamcrawl", m)])
    assert line == (
        "- beamcrawl: 861 MB sampled = beamcrawl_round.py 780 (its own peak 800)"
        " + beamcrawl.analysis.charts 80 + nice 0 (its own peak 40) + python 1"
    )
    one = compare.RunMeasure("floor", [], peak_parts=[(10, 10, "python floor_crawler.py")])
    assert compare.peak_lines([compare.Row("floor", one)]) == ""  # one process: the table says it


def test_weigh_cpu_divides_each_interval_by_its_speed() -> None:
    # 2 s of CPU at a 10 ms piece, 3 more at 20 ms, 1 after the last sample at 20 ms.
    pieces, times = weigh_cpu([(2.0, 0.010), (5.0, 0.020)], 6.0)
    assert times == [0.010, 0.020]
    assert pieces == pytest.approx(2 / 0.010 + 3 / 0.020 + 1 / 0.020)
    # A sample read before a process's last CPU was counted cannot take CPU back.
    assert weigh_cpu([(2.0, 0.01), (1.5, 0.01), (3.0, 0.01)], 3.0)[0] == pytest.approx(300)
    assert weigh_cpu([], 5.0) == (0.0, [])


def test_fetch_pauses_counts_whole_seconds_without_a_request() -> None:
    starts = [100.1, 100.9, 101.5, 104.2, 104.3, 105.0, 108.7]
    span, idle, longest = compare.fetch_pauses([{"start": t} for t in starts])
    assert (span, idle, longest) == (9, 4, 2)  # 102-103 and 106-107
    assert compare.fetch_pauses([]) == (0, 0, 0)


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        ("a.html", "http://h.com:1/x/a.html"),
        ("/b#frag", "http://h.com:1/b"),
        ("//Other.COM:1/c?q=1", "http://other.com:1/c?q=1"),
    ],
)
def test_floor_links_resolve_against_base(href: str, expected: str) -> None:
    body = (
        f'<html><head><base href="/x/"></head><body><a href="{href}">l</a>'
        '<a rel="nofollow" href="/skip">s</a></body></html>'
    )
    links = floor_crawler.extract_links(body.encode(), "http://h.com:1/page.html")
    assert [floor_crawler.normalise(u)[1] for u in links] == [expected]  # type: ignore[index]
