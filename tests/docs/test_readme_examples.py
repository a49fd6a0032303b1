"""The README's shell examples work when copied: every fenced ``sh`` block not marked
``<!-- not run: reason -->`` just before it is run, top to bottom, as one shell session in a
temporary folder, with free ports in place of the README's 8800 (simweb) and 8086 (the
Bigtable emulator) and the virtualenv's ``beamcrawl`` first on PATH (as after activating it).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.+?)\s*-->")
PORTS = ("8800", "8086")


def shell_blocks(text: str) -> list[tuple[str, str | None]]:
    """``(code, reason not run or None)`` of every fenced ``sh`` block, in order."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marker = NOT_RUN.search(previous)
            end = lines.index("```", i + 1)
            blocks.append(("\n".join(lines[i + 1 : end]), marker.group(1) if marker else None))
            i = end
        i += 1
    return blocks


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_sh_block_is_run_or_says_why_not() -> None:
    blocks = shell_blocks(README.read_text(encoding="utf-8"))
    runnable = [code for code, reason in blocks if reason is None]
    assert any("beamcrawl crawl" in code and "seeds.txt" in code for code in runnable)
    assert all(reason for code, reason in blocks if code not in runnable)
    # A fence other than sh/text/plain would escape both the test and the marker.
    fences = set(re.findall(r"^```(\w*)$", README.read_text(encoding="utf-8"), re.M))
    assert fences <= {"", "sh", "text"}, fences


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("readme")
    ports = {p: str(_free_port()) for p in PORTS}
    script = ["set -euo pipefail"]
    for code, reason in shell_blocks(README.read_text(encoding="utf-8")):
        if reason is None:
            for fixed, free in ports.items():
                code = code.replace(fixed, free)
            script.append(code)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("BIGTABLE_EMULATOR_HOST", None)
    # An example that writes under ~ writes in the test's folder; the binaries `make test`
    # cached (the emulator) are still found where they are.
    cache = str(Path.home() / ".cache" / "beamcrawl")
    env.setdefault("BEAMCRAWL_CACHE_DIR", cache)
    env.setdefault("BEAMCRAWL_CACHE", cache)
    env["HOME"] = str(work)
    # Output to files, not pipes: the background servers the examples start keep a pipe open.
    with open(work / ".stdout", "w+") as out, open(work / ".stderr", "w+") as err:
        proc = subprocess.Popen(
            ["bash", "-c", "\n".join(script)], cwd=work, env=env, text=True, stdout=out, stderr=err,
            start_new_session=True,
        )  # fmt: skip
        try:
            proc.wait(timeout=900)
        finally:
            # The examples leave simweb and the emulator running in the background, as a
            # user's shell would: stop the whole session.
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            proc.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    return {"work": work, "rc": proc.returncode, "stdout": stdout, "stderr": stderr}


def _reports(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((folder / "reports").glob("round-*.json"))]


def test_readme_examples_run(session: dict) -> None:
    assert session["rc"] == 0, (session["stdout"][-3000:], session["stderr"][-3000:])


def test_readme_crawl_example_crawls_simweb(session: dict) -> None:
    work = session["work"]
    seeds = (work / "seeds.txt").read_text().split()
    assert len(seeds) == 20 and all(s.startswith("http://") for s in seeds)
    first, second = _reports(work / "crawl-out")
    # Every seeded host was reached (robots.txt and its root), then the pages their links
    # name (the old example's hosts did not exist in simweb: it crawled 4 URLs and stopped).
    assert first["hosts_planned"] == 20, first["hosts_planned"]
    assert first["responses"] > 20, first["responses"]  # robots.txt of each, then roots
    assert second["responses"] > 20, second["responses"]
    assert first["new_urls"] > 100, first["new_urls"]


def test_readme_audit_example_passes_every_check(session: dict) -> None:
    lines = session["stdout"].splitlines()
    checks = {line.split(":", 1)[0]: line for line in lines if re.match(r"^(robots|overlaps|gaps|robots-first): ", line)}
    assert set(checks) == {"robots", "overlaps", "gaps", "robots-first"}, session["stdout"][-3000:]
    assert all(": ok (" in line for line in checks.values()), checks


def test_readme_bigtable_example_crawls_into_the_emulator(session: dict) -> None:
    (report,) = _reports(session["work"] / "crawl-bt")
    assert report["hosts_planned"] == 20 and report["responses"] > 20, report
    assert not (session["work"] / "crawl-bt" / "store.sqlite").exists()
    info = [line for line in session["stdout"].splitlines() if line.split()[:1] == ["frontier"] and "rows" in line]
    assert info, session["stdout"][-2000:]
