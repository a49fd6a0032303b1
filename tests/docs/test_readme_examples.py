"""The README's shell examples work when copied: every fenced ``sh`` block not marked
``<!-- not run: reason -->`` just before it is run, top to bottom, as one shell session in a
temporary folder (its own ``HOME``, as on a fresh machine), with free ports in place of the
README's 8800 (simweb), 8086 (the Bigtable emulator) and 8470 (the control API) and the
virtualenv's ``beamcrawl`` first on PATH (as after activating it). The commands that
``notebooks/README.md`` suggests are checked to come with ``pip install -e '.[notebooks]'``.
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
PORTS = ("8800", "8086", "8470")


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
    return {"work": work, "rc": proc.returncode, "stdout": stdout, "stderr": stderr, "ports": ports}


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
    checks = {
        line.split(":", 1)[0]: line for line in lines if re.match(r"^(robots|overlaps|gaps|robots-first): ", line)
    }
    assert set(checks) == {"robots", "overlaps", "gaps", "robots-first"}, session["stdout"][-3000:]
    assert all(": ok (" in line for line in checks.values()), checks


def test_readme_bigtable_example_crawls_into_the_emulator(session: dict) -> None:
    (report,) = _reports(session["work"] / "crawl-bt")
    assert report["hosts_planned"] == 20 and report["responses"] > 20, report
    assert not (session["work"] / "crawl-bt" / "store.sqlite").exists()
    info = [line for line in session["stdout"].splitlines() if line.split()[:1] == ["frontier"] and "rows" in line]
    assert info, session["stdout"][-2000:]


def _json_lines(stdout: str) -> list[dict]:
    found = []
    for line in stdout.splitlines():
        if line.startswith("{") and line.endswith("}"):
            try:
                found.append(json.loads(line))
            except ValueError:
                pass
    return found


def test_readme_hosts_submit_and_export_examples(session: dict) -> None:
    work, port = session["work"], session["ports"]["8800"]
    text = README.read_text(encoding="utf-8")
    # The answer the README shows under its `submit` line is the one the command gives.
    (shown,) = [line[2:] for line in text.splitlines() if line.startswith('# {"accepted"')]
    assert shown.replace("8800", port) in session["stdout"].splitlines(), session["stdout"][-3000:]
    policies = [
        d
        for d in _json_lines(session["stdout"])
        if set(d) == {"host", "min_delay_ms", "pause_until", "blocked", "updated_at"}
    ]
    assert {"site0003.ch", "www.site0002.fr"} <= {p["host"] for p in policies}, policies
    paused = next(p for p in policies if p["host"] == "www.site0002.fr")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", paused["pause_until"]), paused
    assert sorted((work / "state" / "urls").glob("part-*.parquet")) and sorted(
        (work / "state" / "hosts").glob("part-*.parquet")
    )
    rows = [line.split("│")[1].strip() for line in session["stdout"].splitlines() if line.count("│") == 3]
    assert {"state", "fetched", "queued"} <= set(rows), rows  # duckdb's table of the exported seen set


def test_readme_api_example_runs_on_a_fresh_home(session: dict) -> None:
    work, port = session["work"], session["ports"]["8800"]
    token = work / ".beamcrawl" / "api-token"
    assert token.is_file() and token.stat().st_mode & 0o077 == 0, oct(token.stat().st_mode)
    assert "beamcrawl api: warning" not in session["stderr"]
    answers = _json_lines(session["stdout"])
    assert {"accepted": 1, "duplicates": 0, "rejected": []} in answers, answers
    (policy,) = [
        a for a in answers if a.get("host") == "site0003.ch" and a.get("min_delay_ms") == 5000 and "record" not in a
    ]
    (view,) = [a for a in answers if a.get("host") == f"site0003.ch:{port}" and "record" in a]
    assert view["policy"] == policy and view["policy_from"] == "site0003.ch"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", view["record"]["last_fetch_end"]), view["record"]
    (rounds,) = [a for a in answers if "rounds" in a]
    assert [r["round"] for r in rounds["rounds"]] == [1, 2]


def test_readme_duckdb_examples_read_the_crawl(session: dict) -> None:
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in session["stdout"].splitlines() if "│" in line]
    assert ["status", "count_star()"] in rows and any(r[0] == "200" and int(r[1]) > 20 for r in rows if len(r) == 2), (
        rows
    )
    # The link-graph query: the top hosts by how many other hosts link to them. Which hosts lead
    # depends on what the rounds reached; that some host of the crawl is linked from several does not.
    port = session["ports"]["8800"]
    start = rows.index(["dst_host", "count(DISTINCT src_host)"])
    linked = [r for r in rows[start + 2 :] if len(r) == 2 and r[0].endswith(f":{port}")]
    assert linked and int(linked[0][1]) >= 2, rows
    assert [int(r[1]) for r in linked] == sorted((int(r[1]) for r in linked), reverse=True), linked


def test_readme_crawls_on_a_test_web_do_not_ask_for_a_contact_url(session: dict) -> None:
    # They all pass --resolve: the warning is for crawls that go out to real sites.
    assert "contact for this crawl" not in session["stderr"]


# What installs each command notebooks/README.md runs: (the package .[notebooks] lists, the
# distribution whose console script it is). pip and make come with the machine.
_NOTEBOOK_COMMANDS = {
    "jupyter": ("nbconvert", "jupyter-core"),  # nbconvert requires jupyter-core, which has `jupyter`
    "papermill": ("papermill", "papermill"),
    "duckdb": ("duckdb-cli", "duckdb-cli"),  # the `duckdb` Python module has no command
}


def _extras() -> dict[str, list[str]]:
    import ast

    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    (node,) = [k.value for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg == "extras_require"]
    return ast.literal_eval(node)


def test_notebook_readme_commands_come_with_the_notebooks_extra() -> None:
    from importlib import metadata

    text = (ROOT / "notebooks" / "README.md").read_text(encoding="utf-8")
    commands = set()
    for code, _ in shell_blocks(text):
        for line in code.splitlines():
            words = [w for w in line.split("#", 1)[0].split() if "=" not in w or w.startswith("-")]
            if words and not line.startswith((" ", "\t")):  # a continued line is no command
                commands.add(words[0])
    commands -= {"pip", "make"}
    assert {"jupyter", "duckdb"} <= commands, commands
    listed = {re.split(r"[<>=!~\[ ]", r, maxsplit=1)[0].lower() for r in _extras()["notebooks"]}
    for command in sorted(commands):
        assert command in _NOTEBOOK_COMMANDS, f"notebooks/README.md runs {command}: say what installs it"
        package, script_dist = _NOTEBOOK_COMMANDS[command]
        assert package in listed, f"{command} comes with {package}, which .[notebooks] does not install"
        try:
            dist = metadata.distribution(script_dist)
        except metadata.PackageNotFoundError:
            continue  # not installed here (.[test] lacks papermill): the table above stands unchecked
        assert command in {ep.name for ep in dist.entry_points if ep.group == "console_scripts"}, (command, script_dist)
