"""Refusals end to end through the CLI (#29): a host that answers 403 to signed requests, a
host whose robots.txt disallows our token while allowing ``*`` and a host whose robots.txt
refuses the crawl's declared purpose (``--purpose ai-train``) for the whole site are held from
the round after, their due URLs left queued; a control host goes on. The server's own request log proves no
refusing host was asked again, and ``hosts release`` makes a host eligible again.

One loopback server plays the four hosts (by Host header); the crawl is signed (Web Bot
Auth) and runs as the real command, two rounds, then one more after the release.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from aiohttp import web

from beamcrawl.cli import hosts
from beamcrawl.core.net.botauth import generate_keys
from beamcrawl.schemas.records import FrontierEntry
from beamcrawl.stores.base import open_store
from loopback import LoopbackServer, serving  # tests/loopback.py

pytestmark = pytest.mark.e2e

SIGNED_NO, TOKEN_NO, PURPOSE_NO, CONTROL = "signed-no.test", "token-no.test", "purpose-no.test", "control.test"
HOSTS = (SIGNED_NO, TOKEN_NO, PURPOSE_NO, CONTROL)
REFUSING_ROBOTS = "User-agent: beamcrawl\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
NO_TRAINING_ROBOTS = "User-agent: *\nContent-Signal: search=yes, ai-train=no\nAllow: /\n"


class _FourHosts(LoopbackServer):
    """Pages ``/p/N`` link to ``/p/N+1`` on every host, so each round queues new URLs on
    each; every request is logged (host, path, signed) before it is answered."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str, bool]] = []
        self.lock = threading.Lock()

    def requests(self) -> list[tuple[str, str, bool]]:
        with self.lock:
            return list(self.log)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        host = request.host.rpartition(":")[0] or request.host
        signed = "Signature-Input" in request.headers
        with self.lock:
            self.log.append((host, request.path, signed))
        if request.path == "/robots.txt":
            if host == TOKEN_NO:
                return web.Response(text=REFUSING_ROBOTS, content_type="text/plain")
            if host == PURPOSE_NO:
                return web.Response(text=NO_TRAINING_ROBOTS, content_type="text/plain")
            return web.Response(status=404, text="no robots.txt")
        if host == SIGNED_NO and signed:
            return web.Response(status=403, text="no bots, thank you")
        n = int(request.path.rsplit("/", 1)[-1]) if request.path.startswith("/p/") else 0
        links = "".join(f'<a href="http://{h}:{self.port}/p/{n + 1}">next</a>' for h in HOSTS)
        return web.Response(text=f"<html><body><p>page {n}</p>{links}</body></html>", content_type="text/html")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", *args], capture_output=True, text=True, timeout=600
    )


def _crawl(out: Path, seeds: Path, keys: Path, rounds: int) -> subprocess.CompletedProcess[str]:
    proc = _cli(
        "crawl", "--seeds", str(seeds), "--out", str(out), "--rounds", str(rounds),
        "--resolve", "*=127.0.0.1", "--allow-private-networks", "--min-delay", "0.2", "--round-window", "2",
        "--signing-key", str(keys / "signing-key.pem"), "--signature-agent", "https://crawler.example/beamcrawl",
        "--runner", "FnApiRunner", "--purpose", "ai-train",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _pages(log: list[tuple[str, str, bool]], host: str) -> list[str]:
    return [path for h, path, _ in log if h == host and path != "/robots.txt"]


def _queued(out: Path) -> list[str]:
    with open_store(f"sqlite:///{out}/store.sqlite") as store:
        return [FrontierEntry.from_cells(cells).url for _key, cells in store.read_range("frontier")]


def _show(out: Path, host: str) -> dict:
    """``beamcrawl hosts show HOST --crawl OUT``, in this process (its subprocess start-up is
    the release's, below)."""
    shown = io.StringIO()
    assert hosts.main(["show", host, "--crawl", str(out)], out=shown) == 0
    return json.loads(shown.getvalue())


def test_refusing_hosts_are_not_asked_again_until_released(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    generate_keys(str(keys))  # what `beamcrawl keys generate --out keys` does
    out = tmp_path / "out"
    with serving(_FourHosts()) as server:
        port = server.port
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(f"http://{h}:{port}/p/0\n" for h in HOSTS))
        first = _crawl(out, seeds, keys, rounds=2)
        log = server.requests()
        # Round 1 asked each host once (its seed; robots.txt first); round 2 asked the control
        # host for the URL round 1 found, and neither refusing host for anything.
        assert _pages(log, SIGNED_NO) == ["/p/0"] and all(signed for _, _, signed in log)
        assert _pages(log, TOKEN_NO) == []  # its robots.txt refused /p/0 for us: never asked
        assert _pages(log, PURPOSE_NO) == []  # its robots.txt refuses ai-train: never asked
        assert _pages(log, CONTROL) == ["/p/0", "/p/1"]
        # Their URLs found meanwhile are deferred, not deleted: still queued.
        queued = _queued(out)
        for host in (SIGNED_NO, TOKEN_NO, PURPOSE_NO):
            assert f"http://{host}:{port}/p/1" in queued, queued
        signed_no, token_no = _show(out, f"{SIGNED_NO}:{port}"), _show(out, f"{TOKEN_NO}:{port}")
        (status,) = signed_no["refusals"]
        assert status["kind"] == "status" and status["evidence"]["status"] == 403 and status["identity"]["key"]
        assert status["recheck"].startswith("one URL after ")
        (token,) = token_no["refusals"]
        assert token["kind"] == "token" and token["evidence"]["lines"] == ["1: User-agent: beamcrawl"]
        (purpose,) = _show(out, f"{PURPOSE_NO}:{port}")["refusals"]
        assert purpose["kind"] == "purpose" and purpose["identity"]["purposes"] == ["ai-train"], purpose
        assert "ai-train" in purpose["evidence"]["robots"], purpose
        assert _show(out, f"{CONTROL}:{port}")["refusals"] == []
        # The round reports and summaries count them: recorded in round 1, in force in round 2.
        reports = [json.loads(p.read_text()) for p in sorted((out / "reports").glob("round-*.json"))]
        assert reports[0]["refusals"]["recorded"] == {"status": 1, "token": 1, "purpose": 1}
        assert reports[1]["refusals"]["hosts_in_force"] == 3 and reports[1]["refusals"]["urls_held"] >= 3
        assert "hosts that refused us: 3 this round (status 1, token 1, purpose 1)" in first.stdout
        assert "refused the crawler's identity 3 hosts" in first.stdout

        released = _cli("hosts", "release", f"{SIGNED_NO}:{port}", "--crawl", str(out))
        assert released.returncode == 0, released.stderr
        assert [r["refusal"]["kind"] for r in json.loads(released.stdout)] == ["status"]
        _crawl(out, seeds, keys, rounds=1)
        after = server.requests()[len(log) :]
    # Released, the host is asked again (and refuses again: recorded again); the other stays held.
    assert _pages(after, SIGNED_NO) and not _pages(after, TOKEN_NO) and not _pages(after, PURPOSE_NO)
    assert [r["kind"] for r in _show(out, f"{SIGNED_NO}:{port}")["refusals"]] == ["status"]
