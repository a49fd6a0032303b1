"""Tests for beamcrawl.cli.quicktools (the quick CLI commands)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from beamcrawl.cli.quicktools import normalize_cmd, robots_check_cmd

REPO = Path(__file__).resolve().parents[2]  # subprocesses import beamcrawl from here


def test_normalize_cmd() -> None:
    out = io.StringIO()
    code = normalize_cmd(
        [
            "HTTPS://News.Example.IN:443/cricket/./live/../final?utm_source=wa&id=7#scorecard",
            "ftp://example.com/",
            "http://example.com",
            "",
        ],
        out,
    )
    assert code == 0
    assert out.getvalue().splitlines() == [
        "3c2dd40b56b2f786\thttps://news.example.in/cricket/final?id=7",
        "invalid\tunsupported scheme 'ftp'\tftp://example.com/",
        "a097098a4e7151f8\thttp://example.com/",
        "invalid\tempty URL\t",
    ]


def test_normalize_cmd_no_urls() -> None:
    out = io.StringIO()
    assert normalize_cmd([], out) == 0
    assert out.getvalue() == ""


ROBOTS = b"""\
User-agent: *
Disallow: /private/

User-agent: BeamCrawl
Disallow: /docs/
"""


def test_robots_check_cmd(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_bytes(ROBOTS)
    out, err = io.StringIO(), io.StringIO()
    urls = [
        "https://example.com/docs/a",
        "https://example.com/private/a",
        "https://example.com/robots.txt",
        "/docs/x",
        "https://example.com/%64ocs/escaped",  # checked in normalised form
        "https://example.com/x/../docs/dotted",
    ]
    assert robots_check_cmd(str(robots), "beamcrawl", urls, out, err) == 0
    assert err.getvalue() == ""
    assert out.getvalue().splitlines() == [
        "disallowed\thttps://example.com/docs/a",
        "allowed\thttps://example.com/private/a",
        "allowed\thttps://example.com/robots.txt",
        "invalid\t/docs/x\tmissing scheme",  # the crawler never fetches a bare path
        "disallowed\thttps://example.com/%64ocs/escaped",
        "disallowed\thttps://example.com/x/../docs/dotted",
    ]

    out = io.StringIO()
    assert robots_check_cmd(str(robots), "otherbot", urls[:2], out, err) == 0
    assert out.getvalue().splitlines() == [
        "allowed\thttps://example.com/docs/a",
        "disallowed\thttps://example.com/private/a",
    ]


def test_robots_check_cmd_missing_file(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    missing = tmp_path / "nope.txt"
    assert robots_check_cmd(str(missing), "beamcrawl", ["https://e.com/"], out, err) == 2
    assert out.getvalue() == ""
    message = err.getvalue()
    assert message.count("\n") == 1
    assert str(missing) in message
    assert "No such file" in message


def test_robots_check_cmd_unreadable(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert robots_check_cmd(str(tmp_path), "beamcrawl", ["/x"], out, err) == 2  # a directory
    assert err.getvalue().count("\n") == 1


def test_robots_check_cmd_bad_agent(tmp_path: Path) -> None:
    robots = tmp_path / "robots.txt"
    robots.write_bytes(ROBOTS)
    out, err = io.StringIO(), io.StringIO()
    assert robots_check_cmd(str(robots), "Mozilla/5.0 (x)", ["/x"], out, err) == 2
    assert "product token" in err.getvalue()
    assert err.getvalue().count("\n") == 1


def test_import_is_quick_and_beam_free() -> None:
    code = (
        "import sys, time\n"
        "t = time.perf_counter()\n"
        "import beamcrawl.cli.quicktools\n"
        "print(time.perf_counter() - t)\n"
        "heavy = [m for m in ('apache_beam', 'tldextract', 'idna', 'aiohttp', 'pyarrow')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    # (How long the import takes: bench/speed_claims.py.)
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=REPO)


_CORE = sorted(
    ".".join(f.relative_to(REPO).with_suffix("").parts)
    for f in (REPO / "beamcrawl" / "core").rglob("*.py")
    if f.name != "__init__.py"
)


@pytest.mark.parametrize("module", [*_CORE, "beamcrawl.cli.quicktools"])
def test_core_modules_do_not_import_beam(module: str) -> None:
    """Nothing in core/ imports Beam (the quick tools answer in well under a second)."""
    code = f"import sys, {module}; assert 'apache_beam' not in sys.modules, 'apache_beam'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
