"""Rounds on a real Flink session cluster: a JobManager, two TaskManagers and an SDK worker
pool, each its own process, started and stopped with ``beamcrawl flink-cluster`` as the
README's "Running on your own Flink cluster" says.

Two rounds of simweb go to the cluster with ``--parallelism 4`` (two slots on each
TaskManager), the Bigtable emulator as the store, the SDK workers in the pool
(``--environment_type EXTERNAL``). The same crawl of the same web (same seed, same port) runs
on the FnApiRunner, and the two outputs must be equal by the golden summary's comparison.
The server-side audit must be clean, and Flink's REST API must show the rounds' jobs with
subtasks on both TaskManagers.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.simweb.audit import audit
from beamcrawl.simweb.testing import running_simweb
from beamcrawl.stores.emulator import scratch_store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "golden"))
from golden_summary import diff, summarize  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MIN_DELAY = 0.05
# As the golden crawl: no server latency and a window far longer than any host's work, so
# every due URL gets its slot whatever the machine's load (outputs depend on the web only).
# --max-delay 2 caps nothing (simweb's longest Crawl-delay is 2 s), so the audit's delays hold.
WEB = {"hosts": 10, "seed": 5, "pages_per_host": 12, "latency_scale": 0.0}
WARC_MAX = 16 * 1024  # the least --warc-max-bytes: a round's writers each rotate a few times
CRAWL = [
    "--rounds", "2", "--resolve", "*=127.0.0.1", "--allow-private-networks",
    "--min-delay", str(MIN_DELAY), "--max-delay", "2", "--round-window", "60", "--max-body-bytes", "4096",
    "--warc-max-bytes", str(WARC_MAX),
]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _beamcrawl(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, BEAMCRAWL_PROGRESS="plain", BEAMCRAWL_PROGRESS_EVERY="1")
    return subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def _rest(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://localhost:{port}{path}", timeout=10) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, bigtable_emulator):
    """The cluster, as ``beamcrawl flink-cluster start`` starts it; its SDK workers get this
    process's environment, BIGTABLE_EMULATOR_HOST among it (the emulator fixture sets it)."""
    folder = tmp_path_factory.mktemp("flink-cluster")
    ports = {"rest": _free_port(), "rpc": _free_port(), "pool": _free_port()}
    started = _beamcrawl(
        "flink-cluster", "start", "--dir", str(folder),
        "--rest-port", str(ports["rest"]), "--rpc-port", str(ports["rpc"]), "--pool-port", str(ports["pool"]),
    )  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr[-3000:]
        yield {"dir": folder, **ports, "start": started}
    finally:
        stopped = _beamcrawl("flink-cluster", "stop", "--dir", str(folder))
        assert stopped.returncode == 0, stopped.stderr


def _crawl(work: Path, port: int, runner: list[str]) -> dict:
    """One two-round crawl of the web on ``port`` (a fresh simweb, same seed), into ``work``;
    its plain progress line every second."""
    with scratch_store() as store, running_simweb(str(work), port=port, **WEB) as web:
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(web.base_url(h) for h in web.hosts) + "\n")
        proc = _beamcrawl("crawl", "--seeds", str(seeds), "--out", str(work / "out"), "--store", store, *CRAWL, *runner)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return {
            "proc": proc,
            "out": work / "out",
            "requests": web.requests(),
            "truth": web.truth(),
            "summary": summarize(work / "out", store),
        }


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory):
    port = _free_port()
    on_cluster = [
        "--runner", "FlinkRunner", f"--flink_master=localhost:{cluster['rest']}",
        "--environment_type=EXTERNAL", f"--environment_config=localhost:{cluster['pool']}", "--parallelism", "4",
        # one SDK worker per TaskManager for a whole round, not one per stage (each a Python start)
        "--environment_cache_millis=10000",
    ]  # fmt: skip
    flink = _crawl(tmp_path_factory.mktemp("on-cluster"), port, on_cluster)
    local = _crawl(tmp_path_factory.mktemp("on-fnapi"), port, ["--runner", "FnApiRunner"])
    return {"flink": flink, "local": local}


def test_the_cluster_has_two_task_managers_of_two_slots(cluster):
    overview = _rest(cluster["rest"], "/overview")
    assert overview["taskmanagers"] == 2 and overview["slots-total"] == 4
    assert overview["flink-version"].startswith("1.16.")
    assert f"--flink_master=localhost:{cluster['rest']}" in cluster["start"].stdout  # what to crawl with
    status = _beamcrawl("flink-cluster", "status", "--dir", str(cluster["dir"]))
    assert status.returncode == 0 and json.loads(status.stdout)["running"]


def test_rounds_on_the_cluster_keep_politeness_on_the_server(runs):
    report = audit(runs["flink"]["requests"], runs["flink"]["truth"], agent_token="beamcrawl", min_delay=MIN_DELAY)
    assert report.robots_violations == 0 and report.overlaps == 0 and report.short_gaps == 0, report.summary()
    assert report.violations == 0, report.summary()
    assert report.distinct_hosts == WEB["hosts"]


def test_each_rounds_job_ran_on_both_task_managers(runs, cluster):
    assert "round 1:" in runs["flink"]["proc"].stdout and "round 2:" in runs["flink"]["proc"].stdout
    jobs = _rest(cluster["rest"], "/jobs/overview")["jobs"]
    finished = [job for job in jobs if job["state"] == "FINISHED"]
    assert len(finished) == 2, jobs  # one Flink job a round
    for job in finished:
        vertices = _rest(cluster["rest"], f"/jobs/{job['jid']}")["vertices"]
        where: dict[str, set[str]] = {}
        for vertex in vertices:
            detail = _rest(cluster["rest"], f"/jobs/{job['jid']}/vertices/{vertex['id']}/taskmanagers")
            where[vertex["name"]] = {tm["taskmanager-id"] for tm in detail["taskmanagers"]}
        assert set().union(*where.values()) == {"taskmanager-1", "taskmanager-2"}, where
        fetch = [tms for name, tms in where.items() if "Fetch" in name]
        assert fetch and all(tms == {"taskmanager-1", "taskmanager-2"} for tms in fetch), where


def test_live_progress_on_the_cluster_shows_responses_before_the_round_is_done(runs):
    """The SDK workers report their metrics to Flink only when the job ends; the live line
    follows the fetch loops' progress rows in the store instead (issue #28)."""
    lines = [line for line in runs["flink"]["proc"].stderr.splitlines() if line.startswith("round 1 [")]
    done = next(i for i, line in enumerate(lines) if line.startswith("round 1 [done]"))
    moving = [line for line in lines[:done] if re.search(r"\] \d+:\d\d ([1-9][\d,]*) responses", line)]
    assert moving, "\n".join(lines)


def test_outputs_equal_those_of_the_same_crawl_on_the_fnapi_runner(runs):
    lines = diff(runs["local"]["summary"], runs["flink"]["summary"])
    assert lines == [], "\n".join(lines)
    assert runs["flink"]["summary"]["pages"]["rows"]  # not two empty crawls


# GroupByKeys whose elements are one each per key (a host, a fetch shard, a domain), not
# gathered per bundle first.
PER_KEY_STEPS = (
    "Crawl round/Assign slots/Join by host/CoGroupByKeyImpl/GroupByKey",
    "Crawl round/Fetch/Group by fetch shard",
    "Crawl round/Apply domain budgets/Group by domain",
)


def _reports(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "reports").glob("round-*.json"))]


def test_the_cluster_reports_the_bytes_its_shuffles_moved_as_the_fnapi_runner_does(runs):
    """Flink's job service hands back the SDK workers' PCollection metrics (merged over the
    four tasks): the same crawl's shuffles, step by step, as the in-process runner counts them."""
    flink, local = _reports(runs["flink"]["out"]), _reports(runs["local"]["out"])
    assert len(flink) == len(local) == 2
    for on_flink, in_process in zip(flink, local):
        assert on_flink["responses"] == in_process["responses"] > 0
        assert on_flink["shuffle_bytes"] > 0 and on_flink["shuffle_bytes_per_page"] > 0
        # The near decisions meet the new checksums by part in a join, not a side input: it
        # carries at least the new checksums' span references, every round, on both runners.
        join = "Crawl round/Content seen/Join new content and its near copies/CoGroupByKeyImpl/GroupByKey"
        assert on_flink["shuffle_bytes_by_step"][join] > 0 and in_process["shuffle_bytes_by_step"][join] > 0
        # ... and the round has no side input left on either runner.
        for report in (on_flink, in_process):
            sides = [step for step in report["shuffle_bytes_by_step"] if "[side input" in step]
            assert not sides and report["side_input_bytes"] == 0, sides
        steps = on_flink["shuffle_bytes_by_step"]
        # Every GroupByKey the in-process runner measured is measured on Flink too. Where an
        # element is one host's or one domain's, the bytes are the same within the sampling's
        # noise (counts are exact, sizes sampled: a few dozen host records, some with a robots
        # file, measured 0.75-1.0 times in process across runs) ...
        for step in PER_KEY_STEPS:
            local_bytes = in_process["shuffle_bytes_by_step"][step]
            assert 0.6 * local_bytes <= steps[step] <= 1.5 * local_bytes, (step, steps[step], local_bytes)
        # ... where a stage first gathers its bundle's items per bucket, each of the four tasks
        # sends its own partial: up to four times the elements of the one bundle in process.
        for step, local_bytes in in_process["shuffle_bytes_by_step"].items():
            if "[" not in step and local_bytes >= 0.02 * in_process["shuffle_bytes"]:
                assert 0.6 * local_bytes <= steps[step] <= 4.5 * local_bytes, (step, steps[step], local_bytes)
        assert 0.75 <= on_flink["shuffle_bytes"] / in_process["shuffle_bytes"] <= 4.2
        # Nothing waits for a side input: pages and new checksums wait on disk, a reference a
        # file or span, and cross joins (a page is about 2 KB pickled, a new checksum about 230 B).
        assert on_flink["materialised_bytes"] == in_process["materialised_bytes"] == 0
        # ... and what Flink itself counted its tasks exchanging, from its REST API: into its
        # GroupReduce vertices, the estimate's bytes plus Flink's framing (measured: 1.09-1.13
        # times); between all its tasks, more (a fused stage's outputs leave it one by one).
        into_groups, between = on_flink["flink_bytes_into_groups"], on_flink["flink_bytes_between_tasks"]
        estimate = on_flink["shuffle_bytes"]
        assert 0.8 * estimate <= into_groups <= 1.5 * estimate, (into_groups, estimate)
        assert into_groups < between
        assert in_process["flink_bytes_into_groups"] is None
        # Beam's own per-step figures, which the job service lists as counters, are not metrics
        assert not [key for key in on_flink["metrics"] if key.startswith("beam/metric:")]


def test_the_cluster_rotates_its_warc_files_by_size_and_writes_a_part_per_writer_task(runs):
    """Flink runs a batch task's whole partition as one bundle (Beam's max_bundle_size and
    max_bundle_time_millis are for streaming): a writer opens one file per task and rotates
    it by size. At --warc-max-bytes a WARC file ends with the capture (a response or revisit
    and its request) that passes the size, on either runner, each file indexed by its own
    CDXJ; a round of four tasks writes at most four Parquet parts of each table, in process one."""
    out_of = {"flink": 4, "local": 1}
    for name, most in out_of.items():
        rotated = 0
        for report in _reports(runs[name]["out"]):
            files = report["files"]
            assert 1 <= len(files["warc"]) == len(files["cdxj"]), (name, files)
            assert 1 <= len(files["pages"]) <= most and 1 <= len(files["links"]) <= most, (name, files)
            for rel in files["warc"]:
                with open(runs[name]["out"] / rel, "rb") as fh:
                    records = ArchiveIterator(fh)
                    starts = [records.get_record_offset() for _ in records]
                index = (runs[name]["out"] / rel).with_suffix("").with_suffix(".cdxj").read_text().splitlines()
                captures = sorted(int(json.loads(line.split(" ", 2)[2])["offset"]) for line in index)
                assert captures and set(captures) <= set(starts), (name, rel)
                # the last capture starts under the size, and nothing but its request follows it
                assert captures[-1] < WARC_MAX and len([at for at in starts if at > captures[-1]]) <= 1, (name, rel)
            rotated += len(files["warc"]) > most
        assert rotated, name  # the size, not the tasks, cut some round's files


def test_an_embedded_store_is_refused_for_the_cluster(cluster, tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.invalid/\n")
    proc = _beamcrawl(
        "crawl", "--seeds", str(seeds), "--out", str(tmp_path / "out"), "--store", f"sqlite:///{tmp_path}/s.sqlite",
        "--runner", "FlinkRunner", f"--flink_master=localhost:{cluster['rest']}",
        "--environment_type=EXTERNAL", f"--environment_config=localhost:{cluster['pool']}",
    )  # fmt: skip
    assert proc.returncode == 2 and "embedded store" in proc.stderr and "bigtable://" in proc.stderr


# --- a TaskManager lost mid-round (issue #28) ---------------------------------------------------

KILL_WEB = {"hosts": 8, "seed": 9, "pages_per_host": 25, "latency_scale": 0.0}
KILL_DELAY = 0.4


def _flink_failures(port: int, since: float) -> list[float]:
    """When Flink recorded each failure of the round jobs started since ``since`` (epoch s)."""
    times = []
    for job in _rest(port, "/jobs/overview")["jobs"]:
        if job["name"].startswith("beamcrawl-round-") and job["start-time"] >= since * 1000:
            history = _rest(port, f"/jobs/{job['jid']}/exceptions").get("exceptionHistory", {})
            times += [entry["timestamp"] / 1000 for entry in history.get("entries", [])]
    return sorted(times)


def test_a_task_manager_killed_mid_round_loses_nothing_and_keeps_politeness(cluster, tmp_path):
    """SIGKILL one TaskManager while the round fetches (and start it again, as a supervisor
    would). Flink's fixed-delay restart either finishes the round or the round fails with one
    line and the rerun commits it; nothing served is lost; the server's log shows no request
    between the failure (plus the fence interval and the watch's poll) and the earliest moment
    a restarted try can fetch, and the audit holds across the restart."""
    from beamcrawl.pipelines import flink_cluster
    from beamcrawl.pipelines.flink_failover import WATCH_EVERY
    from beamcrawl.state.fence import FENCE_INTERVAL
    from test_crash_safety import check_nothing_lost  # tests/pipelines/test_crash_safety.py

    state = json.loads((cluster["dir"] / "cluster.json").read_text())
    restart_delay = state["config"]["restart_delay_s"]
    began = time.time()
    on_cluster = [
        "--runner", "FlinkRunner", f"--flink_master=localhost:{cluster['rest']}",
        "--environment_type=EXTERNAL", f"--environment_config=localhost:{cluster['pool']}", "--parallelism", "4",
        "--environment_cache_millis=10000",
    ]  # fmt: skip
    crawl = ["--resolve", "*=127.0.0.1", "--allow-private-networks", "--min-delay", str(KILL_DELAY),
             "--max-delay", "2", "--round-window", "90", "--max-body-bytes", "4096", "--rounds", "1"]  # fmt: skip
    out = tmp_path / "out"
    with scratch_store() as store, running_simweb(str(tmp_path), port=_free_port(), **KILL_WEB) as web:
        seeds = tmp_path / "seeds.txt"  # every page at once: the round fetches for ~10 s a host
        pages = [f"{web.base_url(h)}p/{i}.html" for h in web.hosts for i in range(KILL_WEB["pages_per_host"])]
        seeds.write_text("\n".join(pages) + "\n")
        cmd = [sys.executable, "-m", "beamcrawl.cli.main", "crawl", "--seeds", str(seeds), "--out", str(out),
               "--store", store, *crawl, *on_cluster]  # fmt: skip
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 300
            while len(web.requests(sync=False)) < 3 * KILL_WEB["hosts"] and child.poll() is None:
                assert time.monotonic() < deadline, "the round never started fetching"
                time.sleep(0.1)
            assert child.poll() is None, "the round ended before a TaskManager could be killed"
            os.kill(state["processes"]["taskmanager-1"]["pid"], signal.SIGKILL)
            killed = time.time()
            flink_cluster.restart(cluster["dir"], "taskmanager-1")
            stdout, stderr = child.communicate(timeout=600)
            (tmp_path / "crawl.stderr").write_text(stderr)
        finally:
            if child.poll() is None:  # Ctrl-C: the crawl stops its job server on the way out
                child.send_signal(signal.SIGINT)
                try:
                    child.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    child.kill()
        if child.returncode != 0:
            failed = [line for line in stderr.splitlines() if "round 1 failed and committed nothing" in line]
            assert len(failed) == 1, stderr[-3000:]
            rerun = _beamcrawl("crawl", "--out", str(out), "--store", store, *crawl, *on_cluster)
            assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert (out / "reports" / "round-000001.json").exists(), "round 1 was never committed"
        requests = web.requests()
        truth = web.truth()
        ours = [r for r in requests if "beamcrawl" in r.get("ua", "")]
        check_nothing_lost(out, store, ours, web.port)
    report = audit(requests, truth, agent_token="beamcrawl", min_delay=KILL_DELAY)
    assert report.robots_violations == 0 and report.overlaps == 0 and report.short_gaps == 0, report.summary()
    failures = [t for t in _flink_failures(cluster["rest"], began) if t >= killed - 1]
    assert failures, "Flink recorded no failure of the round's job after the kill"
    starts = sorted(r["start"] for r in ours)
    for failed_at in failures:
        # Seen by the watch within the REST cache's age and a poll; fenced within the interval.
        seen = state["config"]["rest_refresh_ms"] / 1000 + WATCH_EVERY
        quiet = (failed_at + seen + FENCE_INTERVAL + 0.5, failed_at + restart_delay - 0.5)
        during = [round(t - failed_at, 3) for t in starts if quiet[0] < t < quiet[1]]
        watch = [line for line in stderr.splitlines() if "fencing" in line or "fetch shard" in line]
        assert during == [], (
            f"requests after the failure at {failed_at:.3f} beyond the fence interval: {during}; {watch}"
        )
    overview = _rest(cluster["rest"], "/overview")
    assert overview["taskmanagers"] >= 2  # later tests have both again
