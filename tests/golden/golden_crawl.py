"""The golden crawl: one simweb, one set of crawl settings, run where its bytes cannot vary.

simweb's pages carry their server's port in every absolute link, so a crawl of a simweb on
a free port archives different bytes (payload digests, checksums, URL fingerprints) every
time. The golden crawl therefore runs in a network namespace of its own (``unshare -rn``:
a new user and network namespace, no root needed), where simweb listens on port 80 of the
namespace's own loopback: no other process can hold that port, URLs carry no port at all,
and nothing inside can reach any address outside. The crawl goes through the real CLI
(``beamcrawl crawl``, FnApiRunner), as a user would run it.

Determinism comes from the settings (:data:`SETTINGS`), not from hooks in the crawler:

- simweb with no latency (``latency_scale 0``) and the change model off, so every page's
  bytes are a function of the seed (the one stateful page, ``/news.html``, counts its
  servings, and is served once a round);
- a round window far longer than any host's work and a low ``--max-delay`` (it caps
  robots.txt Crawl-delay and the adaptive delay), so every due URL gets a slot and is
  fetched whatever the machine's load; a round ends when its fetches are done, so the long
  window costs nothing;
- ``--revisit-policy uniform --min-revisit-interval 0.001``, so every URL fetched in one
  round is due again in the next: three rounds bring new pages, 304s, unchanged revisits of
  pages without validators, and copies of pages stored in earlier rounds;
- copy hosts from host 0 (mirrors, near copies, look-alikes), a body cap that truncates the
  larger pages.

Usage (from the repository root)::

    python tests/golden/golden_crawl.py WORKDIR     # crawl into WORKDIR/out, print its path
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import beamcrawl

__all__ = ["SETTINGS", "crawl", "namespaces_available"]

# Everything that decides the golden crawl; the golden file's header repeats it, and a
# change here means a new golden (make_golden.py).
SETTINGS: dict[str, Any] = {
    "simweb": {
        "hosts": 20,
        "seed": 5,
        "pages_per_host": 20,
        "copy_hosts_from": 0,
        "latency_scale": 0.0,
        "port": 80,
    },
    "crawl": [
        "--rounds", "3",
        "--resolve", "*=127.0.0.1",
        "--allow-private-networks",
        "--min-delay", "0.05",
        "--max-delay", "0.2",
        "--round-window", "60",
        "--runner", "FnApiRunner",
        "--revisit-policy", "uniform",
        "--min-revisit-interval", "0.001",
        "--max-body-bytes", "4096",
    ],
}  # fmt: skip

_INSIDE = "--inside-namespace"


def namespaces_available() -> str | None:
    """None when ``unshare -rn`` works here, else why not (one line)."""
    if shutil.which("unshare") is None:
        return "the unshare command (util-linux) is not installed"
    probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"unshare -rn failed: {probe.stderr.strip() or probe.returncode}"
    return None


def crawl(work: Path, timeout: float = 600.0) -> Path:
    """Run the golden crawl in a network namespace of its own; return its output folder.

    Args:
        work: An empty folder for the seeds, simweb's logs and the output (``work/out``).
        timeout: Seconds the whole crawl may take before it is killed.

    Raises:
        RuntimeError: If the namespace cannot be made or the crawl fails (with its stderr).
    """
    why = namespaces_available()
    if why is not None:
        raise RuntimeError(f"the golden crawl needs a network namespace of its own: {why}")
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    cmd = ["unshare", "-rn", sys.executable, str(Path(__file__).resolve()), _INSIDE, str(work)]
    # The crawl (and simweb) import the beamcrawl this process imported, wherever it lives.
    root = str(Path(beamcrawl.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    # A session of its own, so that a timeout ends simweb and the crawl with it.
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=work, env=env, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RuntimeError(f"golden crawl took over {timeout:.0f} s; its logs are in {work}") from None
    if proc.returncode != 0:
        raise RuntimeError(f"golden crawl failed (exit {proc.returncode}):\n{stdout[-2000:]}\n{stderr[-4000:]}")
    return work / "out"


def _loopback_up() -> None:
    """Bring up ``lo`` in this (new, empty) network namespace."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, siocgifflags, ifreq))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))


def _inside(work: Path) -> int:
    """The crawl itself, run inside the namespace: simweb on port 80, then the CLI."""
    from beamcrawl.simweb.testing import running_simweb

    _loopback_up()
    out = work / "out"
    web_cfg = dict(SETTINGS["simweb"])
    with running_simweb(str(work / "simweb"), truth=False, **web_cfg) as web:
        seeds = work / "seeds.txt"
        seeds.write_text("".join(web.base_url(h) + "\n" for h in web.hosts))
        cmd = [sys.executable, "-m", "beamcrawl.cli.main", "crawl", "--seeds", str(seeds), "--out", str(out)]
        proc = subprocess.run(cmd + SETTINGS["crawl"], capture_output=True, text=True, cwd=work)
        (work / "crawl.stderr").write_text(proc.stderr)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
    return proc.returncode


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == _INSIDE:
        sys.exit(_inside(Path(sys.argv[2])))
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} WORKDIR")
    print(crawl(Path(sys.argv[1])))
