"""A crawl meant for real sites (no ``--resolve``, no ``--allow-private-networks``), run as a
user runs it but inside a network namespace of its own (``unshare -rn``), so nothing leaves
the machine: with the default User-Agent it says once that the contact URL should be the
operator's own; with the operator's User-Agent, or on a test web, it says nothing
(issue #27, item 16)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from beamcrawl import CONTACT_URL, DEFAULT_USER_AGENT
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.pipelines.crawl import default_contact_warning

REPO = Path(__file__).resolve().parents[2]


def _no_namespace() -> str | None:
    if shutil.which("unshare") is None:
        return "the unshare command (util-linux) is not installed"
    probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True, text=True, check=False)
    return None if probe.returncode == 0 else f"unshare -rn fails here: {probe.stderr.strip()}"


def crawl_offline(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    seeds = tmp_path / f"{name}-seeds.txt"
    seeds.write_text("https://www.example.com/\nhttps://example.org/about\n")
    return subprocess.run(
        ["unshare", "-rn", sys.executable, "-m", "beamcrawl.cli.main", "crawl", "--seeds", str(seeds),
         "--out", str(tmp_path / name), "--rounds", "1", "--round-window", "2", "--runner", "FnApiRunner", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), "BEAMCRAWL_PROGRESS": "off"},
    )  # fmt: skip


@pytest.mark.e2e
@pytest.mark.slow
def test_a_real_crawl_with_the_default_contact_url_says_so_once(tmp_path: Path) -> None:
    why = _no_namespace()
    if why:
        pytest.skip(why)
    default = crawl_offline(tmp_path, "default")
    assert default.returncode == 0, default.stderr[-3000:]
    warnings = [line for line in default.stderr.splitlines() if "contact for this crawl" in line]
    assert len(warnings) == 1, default.stderr[-3000:]
    assert CONTACT_URL in warnings[0] and "--user-agent" in warnings[0]
    # The round ran (and found no DNS in its namespace): the warning stops nothing.
    report = json.loads((tmp_path / "default" / "reports" / "round-000001.json").read_text())
    assert report["round"] == 1

    own = crawl_offline(
        tmp_path, "own", "--user-agent", "Mozilla/5.0 (compatible; examplebot/1.0; +https://bot.example.org/)"
    )
    assert own.returncode == 0, own.stderr[-3000:]
    assert "contact for this crawl" not in own.stderr, own.stderr[-3000:]


def test_only_the_default_contact_on_a_real_web_is_warned_about() -> None:
    real = CrawlConfig(out="out", store="sqlite:///s")
    assert real.user_agent == DEFAULT_USER_AGENT and default_contact_warning(real)
    assert (
        default_contact_warning(CrawlConfig(out="out", store="s", user_agent="mybot/1.0 (+https://me.example/)"))
        is None
    )
    assert default_contact_warning(CrawlConfig(out="out", store="s", resolve=(("*", "127.0.0.1"),))) is None
