"""``beamcrawl simweb audit LOG TRUTH``: one line per check, exit 1 on a violation, 2 on
unreadable input (run as a user runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from beamcrawl.simweb.audit import host_policy
from beamcrawl.simweb.site import SimWeb
from beamcrawl.simweb.truth import write_truth

UA = "Mozilla/5.0 (compatible; beamcrawl/0.1; +https://example.invalid/bot)"


def _audit(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "beamcrawl.cli.main", "simweb", "audit", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def web(tmp_path: Path) -> dict:
    truth_path = tmp_path / "truth.jsonl"
    write_truth(SimWeb(hosts=8, seed=2, pages_per_host=5), truth_path)
    truth = {json.loads(line)["host"]: json.loads(line) for line in truth_path.read_text().splitlines() if line.strip()}
    # A host whose robots.txt allows everything and sets no Crawl-delay: the log's requests
    # are judged by the delay alone.
    host = next(
        h
        for h, rec in truth.items()
        if host_policy(rec.get("robots", {})).mode in ("rules", "allow_all")
        and host_policy(rec.get("robots", {})).allows("/")
        and not host_policy(rec.get("robots", {})).crawl_delay
    )
    return {"truth": truth_path, "host": host}


def _log(path: Path, host: str, starts: list[tuple[float, str]]) -> Path:
    with path.open("w") as fh:
        for start, p in starts:
            fh.write(
                json.dumps({"start": start, "end": start + 0.01, "host": host, "path": p, "ua": UA, "status": 200})
                + "\n"
            )
    return path


def test_polite_log_passes_every_check(web: dict, tmp_path: Path) -> None:
    log = _log(tmp_path / "log.jsonl", web["host"], [(100.0, "/robots.txt"), (101.0, "/"), (102.5, "/")])
    proc = _audit(str(log), str(web["truth"]), "--min-delay", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split(":", 1)[0] for line in lines[:4]] == ["robots", "overlaps", "gaps", "robots-first"]
    assert all(": ok (0 " in line for line in lines[:4]), lines
    assert lines[4].startswith("audited 3 requests to 1 hosts")


def test_a_short_gap_and_an_overlap_are_violations(web: dict, tmp_path: Path) -> None:
    log = _log(tmp_path / "log.jsonl", web["host"], [(100.0, "/robots.txt"), (100.005, "/"), (101.5, "/")])
    proc = _audit(str(log), str(web["truth"]), "--min-delay", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    by_check = {line.split(":", 1)[0]: line for line in proc.stdout.splitlines()}
    assert by_check["gaps"].startswith("gaps: VIOLATIONS 1 ("), by_check
    assert by_check["overlaps"].startswith("overlaps: VIOLATIONS 1 ("), by_check
    assert by_check["robots"].startswith("robots: ok"), by_check


def test_a_first_request_that_is_not_robots_txt_is_a_violation(web: dict, tmp_path: Path) -> None:
    log = _log(tmp_path / "log.jsonl", web["host"], [(100.0, "/"), (102.0, "/robots.txt")])
    proc = _audit(str(log), str(web["truth"]), "--min-delay", "1")
    assert proc.returncode == 1
    assert "robots-first: VIOLATIONS 1 (" in proc.stdout


def test_missing_log_is_one_line(web: dict, tmp_path: Path) -> None:
    proc = _audit(str(tmp_path / "nope.jsonl"), str(web["truth"]))
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "nope.jsonl" in lines[0] and lines[0].startswith("beamcrawl simweb audit: error:"), (
        proc.stderr
    )
