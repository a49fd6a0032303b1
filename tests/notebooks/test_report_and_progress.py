"""What an operator sees of a real crawl: live progress lines while it runs, PNG charts after.

The crawl is the shared small simweb crawl (conftest.demo_crawl, through the real CLI).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from beamcrawl.analysis import charts

LINE = re.compile(
    r"^round (\d+) \[([a-zA-Z ]+)\] \d+:\d\d (\d[\d,]*) responses \(\d[\d,]* robots\.txt\), (\d[\d,]*)/(\d[\d,]*) settled \| "
    r"hosts (\d+) active \((\d+) waiting on delay\) \| [\d.]+ (B|kB|MB|GB) \| errors (\d+) \| "
    r"([\d.]+) pages/s \| (window not started|window over|\d+s left in window)$"
)


def _progress_lines(stderr: str) -> list[re.Match]:
    return [m for m in (LINE.match(line) for line in stderr.splitlines()) if m]


def test_crawl_prints_live_progress_lines_while_it_runs(demo_crawl):
    lines = _progress_lines(demo_crawl["stderr"])
    assert lines, demo_crawl["stderr"][-2000:]
    by_round = {r: [m for m in lines if m.group(1) == str(r)] for r in (1, 2)}
    reports = [json.loads(p.read_text()) for p in sorted((demo_crawl["out"] / "reports").glob("round-*.json"))]
    for report in reports:
        seen = by_round[report["round"]]
        # Lines while the round ran (one a second here), then a final one that agrees with
        # the round's report.
        assert len(seen) >= 3
        assert any(m.group(2) == "fetch" and int(m.group(5)) > 0 for m in seen)
        final = seen[-1]
        assert final.group(2) == "done"
        assert int(final.group(3).replace(",", "")) == report["responses"]
        assert int(final.group(4).replace(",", "")) == int(final.group(5).replace(",", "")) > 0
    # While the window ran, some hosts were seen waiting on their politeness delay.
    assert any(int(m.group(7)) > 0 for m in lines)


def _check_png(path: Path) -> None:
    image = Image.open(path)
    image.load()  # decodes the whole file
    pixels = np.asarray(image.convert("RGB"))
    assert pixels.shape[0] > 200 and pixels.shape[1] > 300
    assert pixels.std() > 20, f"{path.name} looks blank"
    colours = np.unique(pixels.reshape(-1, 3), axis=0)
    assert len(colours) > 50, f"{path.name} has only {len(colours)} colours"


def test_charts_are_drawn_after_each_round(demo_crawl):
    reports = demo_crawl["out"] / "reports"
    for name in charts.CHARTS:
        _check_png(reports / f"{name}.png")
    # Drawn beside the next round (pipelines/round_charts.py), and once the crawl has returned
    # they cover its last round: a drawing read every round's Parquet, the last one's too.
    rounds = [int(r["round"]) for r in charts.read_reports(str(demo_crawl["out"]))]
    assert sorted(p.name for p in (reports / ".charts").iterdir()) == [f"round-{n:06d}.json" for n in rounds]
    last_report = (reports / f"round-{rounds[-1]:06d}.json").stat().st_mtime
    assert all((reports / f"{name}.png").stat().st_mtime >= last_report for name in charts.CHARTS)


def test_report_command_draws_every_chart_from_a_real_crawl(demo_crawl, tmp_path):
    dest = tmp_path / "charts"
    proc = subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", "report", str(demo_crawl["out"]), "--to", str(dest)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    written = [Path(p) for p in proc.stdout.split()]
    assert sorted(p.name for p in written) == sorted(f"{n}.png" for n in charts.CHARTS)
    for path in written:
        assert path.parent == dest
        _check_png(path)


def test_round_summaries_match_the_parquet(demo_crawl):
    import duckdb

    out = demo_crawl["out"]
    for report in charts.read_reports(str(out)):
        data = charts.round_data(str(out), report)
        n = report["round"]
        rows = duckdb.sql(
            f"select status // 100 as c, count(*) from '{out}/pages/round={n}/*.parquet' "
            "where outcome = 'fetched' group by 1"
        ).fetchall()
        assert {f"{c}xx": k for c, k in rows} == {k: v for k, v in data["status"].items() if k != "no response"}
        assert sum(data["waits"].values()) == sum(k for _, k in rows)
        assert sum(v for k, v in data["status"].items() if k != "no response") == report["responses"]


def test_report_on_a_folder_without_rounds_says_so_in_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", "report", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "no round reports" in proc.stderr


def test_a_chart_failure_is_one_log_line_never_an_exception(tmp_path, caplog):
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "round-000001.json").write_text(json.dumps({"round": 1}))
    (tmp_path / "pages" / "round=1").mkdir(parents=True)
    (tmp_path / "pages" / "round=1" / "part-x.parquet").write_bytes(b"not parquet at all")
    charts.charts_after_round(str(tmp_path))
    warnings = [r for r in caplog.records if "report charts not drawn" in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0].getMessage()


def test_errors_by_stage_prefers_dead_letter_counters():
    report = {"metrics": {"errors/parse/ValueError": 2, "errors/parse/KeyError": 1, "errors/fetch/Timeout": 4,
                          "fetch/error": 9, "freshness/error": 5}}  # fmt: skip
    assert charts.errors_by_stage(report) == {"parse": 3, "fetch": 4}
    assert charts.errors_by_stage({"metrics": {"fetch/error": 9, "freshness/error": 5}}, {"store": 2}) == {"store": 2}
    assert charts.errors_by_stage({"metrics": {"fetch/error": 9, "parse/error": 0, "freshness/error": 5}}) == {
        "fetch": 9
    }
    assert charts.errors_by_stage({"metrics": {}}) == {}


@pytest.mark.parametrize("with_errors", [False, True])
def test_errors_chart_draws_both_states(tmp_path, with_errors):
    reports = [
        {"round": 1, "metrics": {"errors/parse/ValueError": 3} if with_errors else {}},
        {"round": 2, "metrics": {}},
    ]
    png = charts.chart_errors(reports, [{}, {}])
    path = tmp_path / "errors.png"
    path.write_bytes(png)
    _check_png(path)


@pytest.mark.parametrize(
    "status, outcome, expected",
    [(200, "fetched", "2xx"), (404, "fetched", "4xx"), (None, "error", "no response"),
     (None, "robots_disallowed", None), (None, "deferred", None), (999, "fetched", None)],
)  # fmt: skip
def test_status_class(status, outcome, expected):
    assert charts.status_class(status, outcome) == expected


def test_content_kind_and_wait_bucket():
    assert charts.content_kind("Text/HTML; charset=utf-8") == "text/html"
    assert charts.content_kind(None) == charts.content_kind("  ") == "(none)"
    assert [charts.wait_bucket(ms) for ms in (0, 99, 700, 59_999, 60_000, -5)] == [
        "0-0.1s",
        "0-0.1s",
        "0.5-1s",
        "30-60s",
        ">=60s",
        "0-0.1s",
    ]


def test_a_rounds_parquet_is_summed_batch_by_batch_as_one_table(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    rows = [
        {
            "status": None if i % 11 == 0 else int(rng.choice([200, 204, 301, 404, 503])),
            "outcome": "error" if i % 11 == 0 else "fetched",
            "content_type": str(rng.choice(["text/html", "application/pdf", "image/png", ""])),
            "waited_ms": float(rng.uniform(0, 4000)),
        }
        for i in range(100)
    ]
    pages = tmp_path / "pages" / "round=3"
    pages.mkdir(parents=True)
    for part, chunk in enumerate((rows[:37], rows[37:], [])):
        pq.write_table(
            pa.Table.from_pylist(chunk, schema=pa.Table.from_pylist(rows).schema), pages / f"p{part}.parquet"
        )
    errors = tmp_path / "errors" / "round=3"
    errors.mkdir(parents=True)
    pq.write_table(pa.table({"stage": ["parse"] * 9 + ["fetch"] * 4, "reason": ["x"] * 13}), errors / "a.parquet")
    pq.write_table(pa.table({"reason": ["y"] * 5}), errors / "b.parquet")  # written before stages were kept
    monkeypatch.setattr(charts, "READ_ROWS", 8)  # many batches a file
    data = charts.round_data(str(tmp_path), {"round": 3})
    assert {k: data[k] for k in ("status", "content_types", "waits")} == charts.summarise_pages(rows)
    assert data["dead_letters"] == {"parse": 9, "fetch": 4, "unknown": 5}
    assert sum(data["status"].values()) == 100
