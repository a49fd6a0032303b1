"""A small real crawl of simweb, shared by the notebook test and the output checks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beamcrawl.simweb.testing import running_simweb

HOSTS = 15
ROUNDS = 2
MIN_DELAY = 0.2


@pytest.fixture(scope="session")
def demo_crawl(tmp_path_factory) -> dict:
    """Crawls 15 simweb hosts for two short rounds through the real CLI (about 10 s)."""
    work = tmp_path_factory.mktemp("demo")
    out = work / "out"
    started = time.monotonic()
    with running_simweb(str(work), hosts=HOSTS, seed=5, pages_per_host=20) as web:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(web.base_url(h) for h in web.hosts) + "\n")
        cmd = [
            sys.executable,
            "-m",
            "beamcrawl.cli.main",
            "crawl",
            "--seeds",
            str(seeds),
            "--out",
            str(out),
            "--rounds",
            str(ROUNDS),
            "--resolve",
            "*=127.0.0.1",
            "--allow-private-networks",
            "--min-delay",
            str(MIN_DELAY),
            "--round-window",
            "3",
            "--runner",
            "FnApiRunner",
        ]
        # Live progress as plain lines (stderr is no terminal here), one a second.
        env = dict(os.environ, BEAMCRAWL_PROGRESS_EVERY="1")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"out": Path(out), "seconds": time.monotonic() - started, "stdout": proc.stdout, "stderr": proc.stderr}
