"""End to end: crawl simweb for two rounds through the real CLI, then audit and read back.

The whole module runs once per set-up: the embedded store, and Cloud Bigtable on the
emulator (initialised first with ``beamcrawl store init``), on the in-process runner, on
Prism and on Flink's local mini-cluster (the job server ``make flink`` prepares; its absence
is a failure, never a skip). A second Flink crawl runs with ``--parallelism 2`` over four
server IPs, to show that task slots never share a host or an IP.

The audit is from the server's side (simweb's request log): zero robots.txt violations,
never two requests in flight on a host, every gap between request starts at least the
host's delay, robots.txt before anything else on each host. Outputs are read back by real
readers: warcio for every WARC file, pyarrow and DuckDB for every Parquet file.
"""

from __future__ import annotations

import collections
import contextlib
import glob
import json
import os
import re
import subprocess
import sys
import time

import duckdb
import pyarrow.parquet as pq
import pytest
from crawl_setups import FLINK, crawl_store, runner_args
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.urls.urlnorm import normalize
from beamcrawl.stores.base import open_store
from beamcrawl.stores.emulator import scratch_store
from beamcrawl.simweb.audit import audit
from beamcrawl.simweb.testing import running_simweb

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # whole crawls: `pytest -m "not slow and not e2e"` leaves it out

MIN_DELAY = 0.3
HOSTS = 40


@pytest.fixture(scope="module", params=["embedded", "bigtable", "prism-bigtable", "flink-bigtable"])
def crawl_run(request, tmp_path_factory):
    """One two-round crawl per set-up: the embedded store on the in-process runner, the
    Bigtable emulator on the in-process runner, and the emulator on Prism, Beam's portable
    runner, whose SDK workers share nothing with the launcher but the store and the files,
    and on Flink (its job server a Java process, the rounds Flink jobs)."""
    work = tmp_path_factory.mktemp(f"e2e-{request.param}")
    out = work / "out"
    with crawl_store(request, request.param, out) as store:
        run = _crawl(work, out, store, runner_args(request.param))
    return run


def _crawl(work, out, store, runner):
    with running_simweb(str(work), hosts=HOSTS, seed=5, pages_per_host=30) as web:
        seeds = work / "seeds.txt"
        seeds.write_text("# every host's root\n" + "\n".join(web.base_url(h) for h in web.hosts) + "\n")
        cmd = [
            sys.executable,
            "-m",
            "beamcrawl.cli.main",
            "crawl",
            "--seeds",
            str(seeds),
            "--out",
            str(out),
            "--store",
            store,
            "--rounds",
            "2",
            "--resolve",
            "*=127.0.0.1",
            "--allow-private-networks",
            "--min-delay",
            str(MIN_DELAY),
            "--round-window",
            "5",
            *runner,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        requests = web.requests()
        truth = web.truth()
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open_store(store) as s:
        state = {table: list(s.read_range(table)) for table in ("urls", "frontier", "hosts")}
    return {
        "out": out, "requests": requests, "truth": truth, "stdout": proc.stdout, "port": web.port,
        "state": state,
    }  # fmt: skip


def test_prints_a_summary_per_round(crawl_run):
    assert "round 1:" in crawl_run["stdout"] and "round 2:" in crawl_run["stdout"]
    reports = sorted(glob.glob(str(crawl_run["out"] / "reports" / "round-*.json")))
    assert len(reports) == 2
    r2 = json.load(open(reports[1]))
    assert r2["responses"] > 0 and r2["urls_due"] > 0
    # Every runner here reports what its shuffles moved (pipelines/job_metrics.py): the
    # in-process runner from its result, Prism and Flink from their job service.
    assert r2["shuffle_bytes"] > 0 and r2["shuffle_bytes_per_page"] > 0
    assert r2["shuffle_bytes_by_step"]["Crawl round/Fetch/Group by fetch shard"] > 0
    # The frontier left, counted: this store is small (an estimate only past 20,000 rows).
    assert r2["frontier_size_exact"] is True
    assert r2["frontier_size"] == len(crawl_run["state"]["frontier"]) > 0


def test_server_side_politeness_audit_is_clean(crawl_run):
    report = audit(crawl_run["requests"], crawl_run["truth"], agent_token="beamcrawl", min_delay=MIN_DELAY)
    assert report.violations == 0, report.summary()
    ours = [r for r in crawl_run["requests"] if "beamcrawl" in r.get("ua", "")]
    assert len({r["host"] for r in ours}) >= HOSTS * 0.9
    assert len(ours) > HOSTS * 5


def test_no_url_fetched_twice_across_rounds(crawl_run):
    counts = collections.Counter(
        (r["host"], r["path"]) for r in crawl_run["requests"] if "beamcrawl" in r.get("ua", "")
    )
    twice = [k for k, n in counts.items() if n > 1 and not k[1].startswith("/robots")]
    assert twice == []


def _page_rows(out):
    files = sorted(glob.glob(str(out / "pages" / "round=*" / "*.parquet")))
    assert files
    rows = []
    for f in files:
        rows.extend(pq.read_table(f).to_pylist())
    return rows


def test_every_request_has_one_fetch_event_and_every_warc_reads(crawl_run):
    out = crawl_run["out"]
    rows = _page_rows(out)
    fetched = [r for r in rows if r["outcome"] == "fetched"]
    ours = [r for r in crawl_run["requests"] if "beamcrawl" in r.get("ua", "")]
    assert len(fetched) == len(ours)

    # One capture per fetch, except near copies (not stored again): a response record, or
    # a revisit record for an exact copy (its payload is in its original's response).
    captures = {}
    for path in glob.glob(str(out / "warc" / "round=*" / "*.warc.gz")):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type in ("response", "revisit"):
                    body = record.content_stream().read()
                    captures[record.rec_headers.get_header("WARC-Target-URI")] = (
                        record.rec_type,
                        record.http_headers.get_statuscode(),
                        len(body),
                    )
    stored = [row for row in fetched if row["duplicate_kind"] != "near"]
    assert len(captures) == len(stored)
    assert any(row["duplicate_kind"] == "exact" for row in fetched)  # ?print=1 copies
    for row in fetched:
        if row["duplicate_kind"] == "near":
            assert row["url"] not in captures and row["blob"] is None
            continue
        rec_type, status, _size = captures[row["url"]]
        assert rec_type == ("revisit" if row["duplicate_kind"] == "exact" else "response"), row["url"]
        assert int(status) == row["status"]

    # blob = file@offset of the page's capture record, in the committed location
    for row in stored[:50] + [row for row in stored if row["duplicate_kind"] == "exact"][:10]:
        rel, offset = row["blob"].rsplit("@", 1)
        with open(out / rel, "rb") as fh:
            fh.seek(int(offset))
            record = next(iter(ArchiveIterator(fh)))
            assert record.rec_type == ("revisit" if row["duplicate_kind"] == "exact" else "response")
            assert record.rec_headers.get_header("WARC-Target-URI") == row["url"]


def test_parquet_loads_in_duckdb(crawl_run):
    out = crawl_run["out"]
    con = duckdb.connect()
    n_pages = con.execute(f"select count(*) from read_parquet('{out}/pages/*/*.parquet')").fetchone()[0]
    assert n_pages == len(_page_rows(out))
    by_round = dict(
        con.execute(f"select round, count(*) from read_parquet('{out}/links/*/*.parquet') group by 1").fetchall()
    )
    assert set(by_round) == {1, 2}
    tz = con.execute(f"select typeof(fetched_at) from read_parquet('{out}/pages/*/*.parquet') limit 1").fetchone()[0]
    assert "TIME ZONE" in tz.upper()


def test_every_fetched_html_page_has_its_out_links_in_links(crawl_run):
    out, truth, port = crawl_run["out"], crawl_run["truth"], crawl_run["port"]
    links = collections.defaultdict(set)
    for f in glob.glob(str(out / "links" / "round=*" / "*.parquet")):
        for row in pq.read_table(f, columns=["src", "dst"]).to_pylist():
            links[row["src"]].add(row["dst"])
    checked = 0
    for row in _page_rows(out):
        if (
            row["outcome"] != "fetched"
            or row["status"] != 200
            or not (row["content_type"] or "").startswith("text/html")
        ):
            continue
        host = row["host"].split(":")[0]
        path = row["url"].split(str(port), 1)[1] if str(port) in row["url"] else None
        page = truth[host]["pages"].get(path) if path else None
        if page is None:
            continue
        expected = {normalize(u) for u in page["links"]}
        assert expected <= links[row["url"]], (row["url"], expected - links[row["url"]])
        checked += 1
    assert checked > HOSTS


def test_frontier_holds_what_is_left_and_rerun_continues(crawl_run):
    state = crawl_run["state"]  # read before the store (and the emulator's tables) went away
    frontier, seen, hosts = len(state["frontier"]), len(state["urls"]), state["hosts"]
    assert seen > frontier > 0
    assert len(hosts) >= HOSTS * 0.9
    assert not os.path.exists(crawl_run["out"] / "_staging")


# --- Flink with two task slots: one owner per host and per IP --------------------------------

IPS = ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"]
IP_DELAY = 0.05
# simweb logs a response's end once its last byte is handed to the socket; a descheduled
# server can log it ~10-15 ms late (see test_politeness_e2e.py). Start gaps have no such lag.
SERVER_END_LAG = 0.015


@contextlib.contextmanager
def _simwebs_on_ips(work, **kw):
    """The same simweb (same seed) served on each address of IPS, on one port: a host's
    pages are the same whichever address it resolves to, and each server's log is exactly
    what one IP saw. Retried on a fresh port if another process holds it on some address."""
    for attempt in range(3):
        with contextlib.ExitStack() as stack:
            first = stack.enter_context(running_simweb(str(work / "ip-1"), bind=IPS[0], **kw))
            try:
                others = [
                    stack.enter_context(running_simweb(str(work / f"ip-{i}"), bind=ip, port=first.port, **kw))
                    for i, ip in enumerate(IPS[1:], 2)
                ]
            except RuntimeError:
                if attempt == 2:
                    raise
                continue
            yield [first, *others]
            return


@pytest.fixture(scope="module")
def flink_parallel_run(tmp_path_factory, bigtable_emulator):
    """Two rounds on Flink with --parallelism 2 and --ip-delay, the hosts spread over four
    server IPs, so fetch shards (keyed by IP) land on both task slots."""
    work = tmp_path_factory.mktemp("e2e-flink-parallel")
    out = work / "out"
    with scratch_store() as store, _simwebs_on_ips(work, hosts=12, seed=8, pages_per_host=25) as webs:
        web = webs[0]
        ip_of = {host: IPS[i % len(IPS)] for i, host in enumerate(web.hosts)}
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(web.base_url(h) for h in web.hosts) + "\n")
        cmd = [
            sys.executable, "-m", "beamcrawl.cli.main", "crawl",
            "--seeds", str(seeds), "--out", str(out), "--store", store, "--rounds", "2",
            *[f"--resolve={host}={ip}" for host, ip in ip_of.items()], "--allow-private-networks",
            "--min-delay", str(MIN_DELAY), "--ip-delay", str(IP_DELAY), "--round-window", "4",
            "--fetch-shards", "8", *FLINK, "--parallelism", "2",
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        by_ip = {ip: w.requests() for ip, w in zip(IPS, webs)}
        truth = web.truth()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"out": out, "by_ip": by_ip, "ip_of": ip_of, "truth": truth, "proc": proc}


def test_flink_two_slots_each_host_has_one_owner(flink_parallel_run):
    run = flink_parallel_run
    ours = [r for reqs in run["by_ip"].values() for r in reqs if "beamcrawl" in r.get("ua", "")]
    report = audit(ours, run["truth"], agent_token="beamcrawl", min_delay=MIN_DELAY)
    assert report.violations == 0, report.summary()
    assert len({r["host"] for r in ours}) == len(run["ip_of"])
    for ip, reqs in run["by_ip"].items():  # each host asked only at the address it resolves to
        assert {r["host"] for r in reqs} <= {h for h, a in run["ip_of"].items() if a == ip}
    reports = [json.load(open(p)) for p in sorted(glob.glob(str(run["out"] / "reports" / "round-*.json")))]
    assert len(reports) == 2 and all(r["responses"] > 0 for r in reports)


def test_flink_two_slots_write_a_file_of_each_kind_per_task_and_report_their_shuffles(flink_parallel_run):
    """A Flink batch task runs its whole partition as one bundle, so each writer opens one
    file per task (rotated by size, far off here): two tasks, at most two files of a kind."""
    reports = [
        json.load(open(p)) for p in sorted(glob.glob(str(flink_parallel_run["out"] / "reports" / "round-*.json")))
    ]
    for report in reports:
        files = report["files"]
        assert 1 <= len(files["warc"]) == len(files["cdxj"]) <= 2, files
        assert 1 <= len(files["pages"]) <= 2 and 1 <= len(files["links"]) <= 2, files
        assert (
            report["shuffle_bytes"] > 0
            and report["shuffle_bytes_by_step"]["Crawl round/Fetch/Group by fetch shard"] > 0
        )
        # slot assignment's join is a Flatten Flink runs itself: its bytes are its inputs'
        assert report["shuffle_bytes_by_step"]["Crawl round/Assign slots/Join by host/CoGroupByKeyImpl/GroupByKey"] > 0


def test_flink_two_slots_each_ip_has_one_owner(flink_parallel_run):
    spans = {}
    for ip, reqs in flink_parallel_run["by_ip"].items():
        reqs = sorted((r for r in reqs if "beamcrawl" in r.get("ua", "")), key=lambda r: r["start"])
        assert len({r["host"] for r in reqs}) == 3  # three hosts share this IP ...
        for prev, nxt in zip(reqs, reqs[1:]):  # ... and took turns: one request at a time, IP_DELAY apart
            assert nxt["start"] - prev["start"] >= IP_DELAY, (ip, prev, nxt)
            assert nxt["start"] - prev["end"] >= IP_DELAY - SERVER_END_LAG, (ip, prev, nxt)
        spans[ip] = [(r["start"], r["end"]) for r in reqs]
    # ... while different IPs did not wait for one another: were they one clock, any two
    # requests would start IP_DELAY apart. (Requests on loopback last a few ms, so whether two
    # of different IPs overlap outright is chance; one close pair is not.)
    close = sum(
        1 for a in IPS for b in IPS if a < b
        for s1, _ in spans[a] for s2, _ in spans[b] if abs(s1 - s2) < IP_DELAY / 2
    )  # fmt: skip
    assert close > 0


# A Flink task's state change, as the job server logs it (pipelines/flink.py sets the format):
# "2026-12-01 04:19:02 INFO org.apache.flink.runtime.taskmanager.Task: MapPartition (...{Fetch, ...})
# (2/2)#0 (<job>_<vertex>_<subtask>_<attempt>) switched from INITIALIZING to RUNNING."
_TASK_SWITCH = re.compile(
    r"^(?P<when>\S+ \S+) INFO org\.apache\.flink\.runtime\.taskmanager\.Task: .*"
    r"\((?P<subtask>\d+/\d+)\)#\d+ \((?P<job>[0-9a-f]+)_\S+\) switched from \w+ to (?P<to>RUNNING|FINISHED)\.$"
)


def test_flink_ran_the_fetch_on_two_task_slots_and_kept_its_log(flink_parallel_run):
    log = (flink_parallel_run["out"] / "logs" / "flink-job-server.log").read_text()
    assert "job server: " in log.splitlines()[0] and "--job-port 0" in log.splitlines()[0]
    # the port it chose itself, and the crawl's rounds went there
    port = re.search(r"JobService started on localhost:(\d+)$", log, re.MULTILINE)[1]
    assert f"job server on localhost:{port};" in flink_parallel_run["proc"].stderr
    # Flink's own record of the fetch stage's subtasks: when each started and finished running
    runs = collections.defaultdict(dict)
    for line in log.splitlines():
        found = _TASK_SWITCH.match(line)
        if found and "{Fetch" in line:
            when = time.mktime(time.strptime(found["when"], "%Y-%m-%d %H:%M:%S"))
            runs[(found["job"], found["subtask"])][found["to"]] = when
    seconds = collections.defaultdict(dict)
    for (job, subtask), at in runs.items():
        if "RUNNING" in at and "FINISHED" in at:
            seconds[job][subtask] = at["FINISHED"] - at["RUNNING"]
    assert len(seconds) == 2  # both rounds
    # In some round both slots fetched for most of the window: each held fetch shards (a
    # slot without any finishes at once); the audits above show they never shared a host or IP.
    assert any(set(by_slot) == {"1/2", "2/2"} and min(by_slot.values()) >= 2 for by_slot in seconds.values()), seconds


def test_flink_console_shows_the_rounds_not_the_teardown(flink_parallel_run):
    proc = flink_parallel_run["proc"]
    assert "round 1:" in proc.stdout and "round 2:" in proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr[proc.stderr.find("Traceback") - 300 :][:3000]
    noise = [line for line in proc.stderr.splitlines() if "hanging up" in line and "normal teardown" not in line]
    assert noise == []
    assert "flink-job-server.log" in proc.stderr  # where the job server's output went
