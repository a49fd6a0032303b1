"""A newcomer's first hour, part two (issue 27): the output folder and the crawl's own record.

Each test runs the ``beamcrawl`` command as a user does, through a subprocess, and checks
what the user sees and what is left on disk. Crawls run on simweb over loopback with a short
window; one crawled folder is made per module and copied for each test that needs one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamcrawl.simweb.testing import running_simweb
from beamcrawl.stores.base import Mutation, open_store

CLI = [sys.executable, "-m", "beamcrawl.cli.main"]
QUICK = ("--resolve", "*=127.0.0.1", "--allow-private-networks", "--min-delay", "0.05", "--round-window", "2",
         "--runner", "FnApiRunner")  # fmt: skip


def run(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, proc.stderr)
    assert lines[0].startswith("beamcrawl crawl: error: ")
    return lines[0]


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    folder = tmp_path_factory.mktemp("web")
    with running_simweb(folder / "web", hosts=6) as handle:
        seeds = folder / "seeds.txt"
        seeds.write_text("\n".join(handle.base_url(h) for h in handle.hosts) + "\n")
        handle.seeds = seeds  # type: ignore[attr-defined]
        yield handle


@pytest.fixture(scope="module")
def crawled(web, tmp_path_factory):
    """One round crawled into ``out`` on an embedded store kept outside it (``state/``)."""
    base = tmp_path_factory.mktemp("crawled")
    store = f"sqlite:///{base}/state/crawl.sqlite"
    proc = run("crawl", "--seeds", str(web.seeds), "--out", str(base / "out"), "--store", store, *QUICK)
    assert proc.returncode == 0, proc.stderr
    return base, store, proc


@pytest.fixture
def copy_of(crawled, tmp_path):
    """A copy of the crawled folder and its store, as if the crawl had run here (its record
    of the other's place rewritten)."""
    base, _, _ = crawled
    out, state = tmp_path / "out", tmp_path / "state"
    shutil.copytree(base / "out", out)
    shutil.copytree(base / "state", state)
    store = f"sqlite://{state}/crawl.sqlite"  # the store's own spelling (one slash less is the same)
    identity = json.loads((out / "crawl.json").read_text())
    (out / "crawl.json").write_text(json.dumps(identity | {"store": store}))
    with open_store(store) as opened:
        opened.mutate("meta", [Mutation.set(b"crawl", {"m:out": str(out).encode()})])
    return out, store


# --- 2. an output folder remembers its store ---------------------------------------------------


@pytest.mark.e2e
def test_out_folder_records_its_crawl_and_store(crawled):
    base, store, _ = crawled
    identity = json.loads((base / "out" / "crawl.json").read_text())
    assert identity["store"] == f"sqlite://{base}/state/crawl.sqlite" and len(identity["crawl_id"]) == 32
    with open_store(store) as opened:
        row = opened.read_keys("meta", [b"crawl"])[b"crawl"]
    assert row["m:id"].decode() == identity["crawl_id"] and row["m:out"].decode() == str(base / "out")


@pytest.mark.e2e
def test_rerun_without_its_store_is_refused_naming_the_store(copy_of, web):
    out, store = copy_of
    before = tree(out)
    proc = run("crawl", "--out", str(out), "--seeds", str(web.seeds), *QUICK)  # no --store
    line = one_error_line(proc)
    assert f"--out {out} belongs to the crawl on --store {store}" in line
    assert tree(out) == before and not (out / "store.sqlite").exists()

    other = f"sqlite://{out.parent}/other.sqlite"
    proc = run("crawl", "--out", str(out), "--store", other, *QUICK)
    assert f"belongs to the crawl on --store {store}, not --store {other}" in one_error_line(proc)
    assert tree(out) == before and not (out.parent / "other.sqlite").exists()


@pytest.mark.e2e
def test_an_emptied_store_or_another_folder_is_refused(copy_of, web, tmp_path):
    out, store = copy_of
    before = tree(out)
    # The store replaced by a new one at the same place: its round 1 would overwrite this one's.
    state = tmp_path / "state" / "crawl.sqlite"
    state.rename(tmp_path / "kept.sqlite")
    proc = run("crawl", "--out", str(out), "--store", store, "--seeds", str(web.seeds), *QUICK)
    assert "holds no crawl (was it emptied?)" in one_error_line(proc)
    assert tree(out) == before
    (tmp_path / "kept.sqlite").rename(state)

    # The crawl's store, given with a new output folder: it belongs to the first one.
    elsewhere = tmp_path / "elsewhere"
    proc = run("crawl", "--out", str(elsewhere), "--store", store, *QUICK)
    assert f"--store {store} belongs to the crawl whose output is {out}; give --out {out}" in one_error_line(proc)
    assert not elsewhere.exists()


@pytest.mark.e2e
def test_a_folder_of_an_earlier_version_with_rounds_its_store_has_not_run_is_refused(copy_of, web, tmp_path):
    out, _ = copy_of
    (out / "crawl.json").unlink()  # written before folders recorded their crawl
    before = tree(out)
    proc = run("crawl", "--out", str(out), "--seeds", str(web.seeds), *QUICK)  # a new embedded store
    assert "holds rounds up to 1 that the embedded store" in one_error_line(proc)
    assert tree(out) == before and not (out / "store.sqlite").exists()


@pytest.mark.e2e
def test_the_same_store_resumes_into_its_folder(copy_of):
    out, store = copy_of
    identity = json.loads((out / "crawl.json").read_text())
    # As a run killed after recording the crawl in the store, before the folder, leaves it.
    (out / "crawl.json").unlink()
    proc = run("crawl", "--out", str(out), "--store", store, *QUICK)
    assert proc.returncode == 0, proc.stderr
    assert "round 2:" in proc.stdout and (out / "reports" / "round-000002.json").is_file()
    assert json.loads((out / "crawl.json").read_text())["crawl_id"] == identity["crawl_id"]


@pytest.mark.e2e
def test_bigtable_folder_rerun_without_store_is_refused(bigtable_uri, web, tmp_path):
    """The issue's case: a crawl on Bigtable, then a rerun on its folder without --store."""
    out = tmp_path / "crawl-bt"
    first = run("crawl", "--out", str(out), "--store", bigtable_uri, "--seeds", str(web.seeds), *QUICK)
    assert first.returncode == 0, first.stderr
    before = tree(out)
    proc = run("crawl", "--out", str(out), "--seeds", str(web.seeds), *QUICK)
    assert (
        f"belongs to the crawl on --store {bigtable_uri}, not the embedded store {out}/store.sqlite"
        in one_error_line(proc)
    )
    assert tree(out) == before and not (out / "store.sqlite").exists()


# --- 3. an unrelated folder is not written into ------------------------------------------------


def test_a_folder_of_other_files_is_refused(web, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me\n")
    proc = run("crawl", "--out", str(mine), "--seeds", str(web.seeds), *QUICK)
    line = one_error_line(proc)
    assert f"--out {mine} is not empty and not a crawl's output (it holds notes.txt)" in line
    assert tree(mine) == {"notes.txt": b"keep me\n"}


# --- 4. a new crawl needs seeds ----------------------------------------------------------------


def test_a_new_crawl_without_seeds_is_an_error(tmp_path):
    proc = run("crawl", "--out", str(tmp_path / "newdir"), *QUICK)
    assert "holds no crawl yet: a new crawl needs --seeds FILE" in one_error_line(proc)
    assert not (tmp_path / "newdir").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run("crawl", "--out", str(empty), *QUICK)
    assert "a new crawl needs --seeds FILE" in one_error_line(proc)
    assert list(empty.iterdir()) == []


# --- 6. seeds are a local file -----------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/seeds.txt", "https://seeds.example/list.txt"])
def test_seeds_given_as_a_web_address_say_seeds_are_a_file(tmp_path, url):
    proc = run("crawl", "--seeds", url, "--out", str(tmp_path / "out"), *QUICK)
    line = one_error_line(proc)
    assert f"--seeds takes a file, not a URL: {url}" in line and "curl -o seeds.txt" in line
    assert "apache-beam[gcp]" not in proc.stderr and not (tmp_path / "out").exists()


# --- 7. a byte-order mark opening a seeds file -------------------------------------------------


@pytest.mark.e2e
def test_a_seeds_file_with_a_byte_order_mark_and_crlf_is_crawled(web, tmp_path):
    seeds = tmp_path / "excel.txt"
    urls = [web.base_url(h) for h in web.hosts[:2]]
    seeds.write_bytes(("\ufeff" + "\r\n".join(urls) + "\r\n").encode("utf-8"))
    proc = run("crawl", "--seeds", str(seeds), "--out", str(tmp_path / "out"), *QUICK)
    assert proc.returncode == 0, proc.stderr
    assert "seeds: 2 queued, 0 already known" in proc.stdout


def test_submit_file_with_a_byte_order_mark(tmp_path):
    listing = tmp_path / "urls.txt"
    listing.write_bytes("\ufeffhttp://ok.example/\r\nhttp://two.example/\r\n".encode())
    crawl = tmp_path / "crawl"
    open_store(f"sqlite:///{crawl}/store.sqlite").close()
    proc = run("submit", "--file", str(listing), "--priority", "normal", "--reason", "r", "--crawl", str(crawl))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"accepted": 2, "duplicates": 0, "rejected": []}


URL = st.sampled_from(["http://a.example/", "https://b.example/x?q=1", "http://c.example:8080/p#frag"])
LINE = st.one_of(URL, st.sampled_from(["", "# comment", "   ", "http://d.example/ # why"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE, min_size=1, max_size=12).filter(lambda ls: any("example" in x and not x.startswith("#") for x in ls)),
       newline=st.sampled_from(["\n", "\r\n"]))  # fmt: skip
def test_a_byte_order_mark_changes_nothing_a_seeds_file_says(tmp_path, lines, newline):
    from beamcrawl.pipelines.seeding import read_seeds

    plain, marked = tmp_path / "plain.txt", tmp_path / "marked.txt"
    text = newline.join(lines) + newline
    plain.write_bytes(text.encode())
    marked.write_bytes(("\ufeff" + text).encode())
    assert read_seeds(str(marked)) == read_seeds(str(plain))


# --- 12, 14, 15. one round watched: progress, the crawl's log, status and GET /v1/status ---------


def _status(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run("status", "--crawl", str(out), *extra, timeout=60)


def _api_status(base: str, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(base + "/v1/status", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.e2e
def test_a_running_round_is_watched_from_elsewhere_and_the_crawl_keeps_its_log(tmp_path):
    from beamcrawl.cli import api

    token = "status-test-token-0123456789"
    env = dict(os.environ, BEAMCRAWL_PROGRESS="plain", BEAMCRAWL_PROGRESS_EVERY="1", **{api.TOKEN_ENV: token})
    with running_simweb(tmp_path / "web", hosts=16) as sw:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(sw.base_url(h) for h in sw.hosts) + "\n")
        out = tmp_path / "out"
        child = subprocess.Popen(
            [*CLI, "crawl", "--seeds", str(seeds), "--out", str(out), "--resolve", "*=127.0.0.1", "--allow-private-networks",
             "--min-delay", "0.4", "--round-window", "8", "--runner", "FnApiRunner"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        live = None
        deadline = time.monotonic() + 150
        while child.poll() is None and time.monotonic() < deadline:
            proc = _status(out, "--json")
            if proc.returncode == 0:
                status = json.loads(proc.stdout)
                if status["running"] and status["live"] and status["live"]["fetched"] > 0:
                    live = status
                    break
            time.sleep(0.3)
        assert live is not None, "no live status seen while the round ran"
        assert live["round"] == 1 and live["alive"] and live["round_started_at"] and live["window_ends_at"]
        assert set(live["live"]) >= {"fetched", "settled", "planned", "errors", "pages_per_s", "stage"}
        text = _status(out).stdout
        assert "round 1: running since " in text and "settled" in text and "pages/s" in text
        logs = list((out / "logs").glob("crawl-*.log"))
        assert len(logs) == 1 and "round 1: running (window 8s) ..." in logs[0].read_text()  # written as it goes

        api_proc = subprocess.Popen([*CLI, "api", "--port", "0", "--crawl", str(out)], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
        try:
            base = api_proc.stdout.readline().split()[-1]
            code, during = _api_status(base, token)
            stdout, stderr = child.communicate(timeout=240)
            assert child.returncode == 0, stderr
            code_after, after = _api_status(base, token)
        finally:
            api_proc.terminate()
            api_proc.wait(timeout=30)
    assert (
        code == 200 and during["round"] in (1, None) and {"running", "alive", "live", "window_ends_at"} <= set(during)
    )
    assert code_after == 200 and after["running"] is False and after["last_round"]["round"] == 1

    # After the round: not running, and the last round's summary, as the crawl printed it.
    text = _status(out).stdout.splitlines()
    assert text[1].startswith("no round running (the last run finished")
    summary = [line for line in stdout.splitlines() if line.startswith(("round 1: ", "  "))][1:]
    assert text[text.index("last round:") + 1 :] == summary

    # The log: everything stdout showed, the progress as plain lines, the log records.
    log = logs[0].read_text()
    for line in stdout.splitlines():
        assert line in log
    plain = [line for line in stderr.splitlines() if line.startswith("round 1 [")]
    assert plain[-1].startswith("round 1 [done]") and plain[-1] in log
    assert "INFO beamcrawl.pipelines.commit: round 1 committed" in log

    # 12: the progress lines agree with the summary.
    report = json.loads((out / "reports" / "round-000001.json").read_text())
    assert f"{report['responses']} responses ({report['robots_fetches']} robots.txt)" in plain[-1]
    assert f"| {report['pages_per_second']:.1f} pages/s |" in plain[-1]
    for line in plain:
        settled, planned = line.split(" settled")[0].rsplit(", ", 1)[1].replace(",", "").split("/")
        assert int(settled) <= int(planned) or int(planned) == 0, line
        if line.startswith(("round 1 [writes]", "round 1 [URL seen]", "round 1 [done]")):
            assert "left in window" not in line, line


# --- 11. the round summary names what operator policies held back ------------------------------


@pytest.mark.e2e
def test_the_round_summary_names_blocked_and_paused_hosts(copy_of, web):
    out, store = copy_of
    from urllib.parse import urlsplit

    blocked, paused = (urlsplit(web.base_url(h)).netloc for h in web.hosts[:2])
    for host, change in ((blocked, ["--block"]), (paused, ["--pause-until", "2h"])):
        proc = run("hosts", "set-policy", host, *change, "--store", store)
        assert proc.returncode == 0, proc.stderr
    proc = run("crawl", "--out", str(out), "--store", store, *QUICK)
    assert proc.returncode == 0, proc.stderr
    m = json.loads((out / "reports" / "round-000002.json").read_text())["metrics"]
    assert m["assign_slots/hosts_blocked"] == 1 and m["assign_slots/hosts_paused"] == 1
    line = next(line for line in proc.stdout.splitlines() if "hosts given no slots" in line)
    urls = lambda n: f"{n} URL{'s' if n != 1 else ''}"  # noqa: E731
    assert f"blocked by operator policy 1 host ({urls(m['assign_slots/urls_blocked'])})" in line
    assert f"paused by operator policy 1 host ({urls(m['assign_slots/urls_paused'])})" in line


# --- 13. small slips ---------------------------------------------------------------------------


def _into_a_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """Runs the command with stdout a pipe whose reader has already gone (``| head`` that
    has read its lines)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([*CLI, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    return proc


def test_output_into_a_closed_pipe_ends_quietly(tmp_path, web):
    with open_store(f"sqlite:///{tmp_path}/store.sqlite") as store:
        from beamcrawl.schemas.records import HostRecord

        store.mutate("hosts", [Mutation.set(b"a.example", HostRecord(host="a.example", delay=1.0).to_cells())])
    web.requests()  # the log complete
    for args in (["hosts", "show", "a.example", "--crawl", str(tmp_path)],
                 ["simweb", "audit", str(web.log_path), str(web.truth_path)]):  # fmt: skip
        proc = _into_a_closed_pipe(*args)
        assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
        assert proc.returncode == 141, (args, proc.returncode, proc.stderr)


def test_count_charts_have_whole_number_ticks(tmp_path, monkeypatch):
    from beamcrawl.analysis import charts

    reports = tmp_path / "out" / "reports"
    reports.mkdir(parents=True)
    for n, errors in ((1, 1), (2, 2)):
        report = {"round": n, "responses": n, "pages_per_second": 1.0, "new_urls": 1, "frontier_size": 2, "urls_due": 1,
                  "metrics": {"errors/parse/ValueError": errors}, "errors": errors, "files": {}}  # fmt: skip
        (reports / f"round-{n:06d}.json").write_text(json.dumps(report))
    proc = run("report", str(tmp_path / "out"))
    assert proc.returncode == 0 and (reports / "errors.png").is_file(), proc.stderr

    ticks: dict[str, list[float]] = {}
    real_png = charts._png

    def capture(fig):  # the figure's axes as drawn, before the PNG is made
        ticks[fig._suptitle.get_text()] = [t for ax in fig.axes[:1] for t in ax.get_yticks()]
        return real_png(fig)

    monkeypatch.setattr(charts, "_png", capture)
    charts.write_charts(str(tmp_path / "out"), str(tmp_path / "charts"))
    for title in (
        "Errors by stage per round",
        "Responses and pages/s per round",
        "Frontier size and new URLs per round",
    ):
        assert ticks[title] and all(float(t).is_integer() for t in ticks[title]), (title, ticks[title])


@pytest.mark.e2e
def test_multi_processing_workers_start_without_a_warning_each(web, tmp_path):
    proc = run("crawl", "--seeds", str(web.seeds), "--out", str(tmp_path / "out"), *QUICK,
               "--direct_running_mode=multi_processing", "--direct_num_workers=2", timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "semi_persistent_directory" not in proc.stderr


# --- 12. on a terminal: log lines above the bar, which stays whole ------------------------------


def _screen(data: str, columns: int) -> list[str]:
    """What a terminal shows after ``data``: enough of one for tqdm's output (printable text,
    CR, LF, cursor up ``ESC [ A``; other escape sequences are dropped)."""
    import re as _re

    lines: list[list[str]] = [[]]
    row = col = 0
    for token in _re.findall(r"\x1b\[(\d*)([A-Za-z])|(\r)|(\n)|([^\x1b\r\n])", data):
        count, code, cr, lf, char = token
        if code == "A":
            row = max(0, row - int(count or 1))
        elif code:
            continue
        elif cr:
            col = 0
        elif lf:
            row += 1
            while len(lines) <= row:
                lines.append([])
        elif char:
            if col >= columns:  # the terminal wraps
                row, col = row + 1, 0
                while len(lines) <= row:
                    lines.append([])
            line = lines[row]
            line.extend(" " * (col - len(line) + 1))
            line[col] = char
            col += 1
    return ["".join(line).rstrip() for line in lines]


@pytest.mark.e2e
def test_on_a_terminal_log_lines_do_not_break_the_bar(tmp_path):
    import fcntl
    import pty
    import struct
    import termios

    columns = 200
    with running_simweb(tmp_path / "web", hosts=8) as sw:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(sw.base_url(h) for h in sw.hosts) + "\n")
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        env = {k: v for k, v in os.environ.items() if k != "BEAMCRAWL_PROGRESS"}
        child = subprocess.Popen(
            [*CLI, "crawl", "--seeds", str(seeds), "--out", str(tmp_path / "out"), "--resolve", "*=127.0.0.1",
             "--allow-private-networks", "--min-delay", "0.5", "--round-window", "7", "--runner", "FnApiRunner",
             "--rounds", "2"],  # round 2 fetches the whole window: the fetch logs how far it got
            stdin=slave, stdout=slave, stderr=slave, env=env,
        )  # fmt: skip
        os.close(slave)
        received = bytearray()
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            received.extend(chunk)
        os.close(master)
        assert child.wait(timeout=240) == 0
    screen = _screen(received.decode("utf-8", "replace"), columns)
    logged = [line for line in screen if "INFO beamcrawl.transforms.fetch: fetch:" in line]
    assert logged, "\n".join(screen)
    for line in logged:  # whole lines of their own, not drawn over by the bar
        assert line.split(" INFO ", 1)[1].startswith("beamcrawl.transforms.fetch: fetch: ") and line.endswith(
            ("in this bundle", "for the stage")  # progress, or how long the stage held the loop back
        ), line
        assert "settled" not in line and "waiting on delay" not in line, line
    bars = [line for line in screen if "settled [" in line]
    assert [bar.split()[:3] for bar in bars] == [["round", "1", "done"], ["round", "2", "done"]], "\n".join(screen)


@pytest.mark.e2e
@pytest.mark.slow
def test_ctrl_c_on_flink_is_one_line(tmp_path):
    """A local Flink cluster (the job server ``make flink`` caches): the workers' gRPC streams
    end with the job service, and each thread used to print its 20-line traceback."""
    import signal

    with running_simweb(tmp_path / "web", hosts=10) as sw:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(sw.base_url(h) for h in sw.hosts) + "\n")
        child = subprocess.Popen(
            [*CLI, "crawl", "--seeds", str(seeds), "--out", str(tmp_path / "out"), "--resolve", "*=127.0.0.1",
             "--allow-private-networks", "--min-delay", "0.3", "--round-window", "60", "--runner", "FlinkRunner",
             "--flink_master", "[local]"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, BEAMCRAWL_PROGRESS="off"),
        )  # fmt: skip
        deadline = time.monotonic() + 400
        while (len([r for r in sw.requests(sync=False) if "beamcrawl" in r.get("ua", "")]) < 12
               and child.poll() is None and time.monotonic() < deadline):  # fmt: skip
            time.sleep(0.2)
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=180)
    assert child.returncode == 130
    lines = [line for line in stderr.strip().splitlines() if " INFO " not in line]  # the job server's start
    assert lines == ["beamcrawl crawl: interrupted; round 1 was not committed, rerun to redo it"], stderr


def test_status_of_a_crawl_whose_process_died_says_no_round_runs(tmp_path):
    import socket

    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    status = {"state": "running", "pid": int(dead.stdout), "host": socket.gethostname(), "round": 4,
              "round_started_at": "2026-12-01T10:00:00Z", "live": None, "updated_at": "2026-12-01T10:00:05Z"}  # fmt: skip
    (out / "status.json").write_text(json.dumps(status))
    proc = run("status", "--crawl", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1].startswith(
        f"no round running (the last run ended unannounced: its process {dead.stdout.strip()} is gone"
    )
    answer = json.loads(run("status", "--crawl", str(out), "--json").stdout)
    assert answer["running"] is False and answer["alive"] is False

    nothing = run("status", "--crawl", str(tmp_path / "nowhere"))
    assert nothing.returncode == 1 and nothing.stderr.startswith("beamcrawl status: error: no crawl at ")
