"""No single element fails a round: an injected failure in each stage, end to end.

One crawl of simweb through the real CLI, with ``BEAMCRAWL_FAIL_ELEMENT`` making one host's
element raise in each stage (a URL for the stages that handle pages, the host for those that
handle hosts). Round 1 must complete; each failure is counted (``errors/<stage>/<type>``
in the report), written to ``errors/round=1/`` with its reason, and its frontier row left as
it was; every other host's root page is stored (WARC and pages/, read back with warcio and
pyarrow). Round 2 fails the same elements again, which quarantines them: a quarantined URL's
frontier rows move into the store's quarantine row, a quarantined host is held. Round 3 runs
without faults and fetches none of them; ``beamcrawl hosts release`` then puts a URL and a
host back, and round 4 fetches them. Last, a failure of the infrastructure fails a round with
one line and commits nothing.

All of it twice: the embedded store on the in-process runner, and the Bigtable emulator on
Flink's local mini-cluster (its SDK workers in the launcher, so they see the fault list too).
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
from crawl_setups import crawl_store, runner_args
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.schemas.records import FrontierEntry
from beamcrawl.pipelines.seeding import submit_urls
from beamcrawl.simweb.testing import running_simweb
from beamcrawl.stores.base import open_store

# Stages whose element is a URL (the fault names the host's root URL: "host:port/$") and
# stages whose element is a host ("host:port$"). fetch handles both: results per URL.
URL_STAGES = (
    "fetch",
    "parse",
    "content_seen",
    "freshness",
    "store",
    "publish_pages",
    "publish_links",
    "url_seen",
    "record",
)
HOST_STAGES = ("select", "resolve", "assign_slots", "budgets")
PLAIN_ROBOTS = {"allow_all", "none", "private", "wildcard", "private_sitemap", "allow_override"}


def _cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    full = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "beamcrawl.cli.main", *args], capture_output=True, text=True, timeout=timeout, env=full
    )


def _frontier(store_uri: str) -> dict[bytes, dict[str, bytes]]:
    with open_store(store_uri) as store:
        return dict(store.read_range("frontier"))


def _warc_responses(out) -> list[str]:
    urls = []
    for path in glob.glob(str(out / "warc" / "*" / "*.warc.gz")):
        with open(path, "rb") as fh:
            urls += [
                r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(fh) if r.rec_type == "response"
            ]
    return urls


@pytest.fixture(scope="module", params=["embedded", "flink-bigtable"])
def run(request, tmp_path_factory):
    work = tmp_path_factory.mktemp(f"dead-letters-{request.param}")
    out = work / "out"
    with crawl_store(request, request.param, out) as store_uri:
        yield _run(work, out, store_uri, runner_args(request.param))


def _run(work, out, store_uri, runner):
    with running_simweb(str(work), hosts=40, seed=5, pages_per_host=8) as web:
        truth = web.truth()
        plain = [
            h for h in web.hosts
            if truth[h]["robots"].get("kind") in PLAIN_ROBOTS and not truth[h]["trap"] and not truth[h]["slow_ms"]
            and not truth[h]["copy_of"] and not truth[h]["role"]
        ]  # fmt: skip
        stages = URL_STAGES + HOST_STAGES
        assert len(plain) >= len(stages) + 4, "the web has too few plain hosts for this test"
        target = {stage: f"{host}:{web.port}" for stage, host in zip(stages, plain)}
        controls = [f"{h}:{web.port}" for h in plain[len(stages) :]]
        faults = ",".join(
            f"{stage}:{hostport}/$" if stage in URL_STAGES else f"{stage}:{hostport}$"
            for stage, hostport in target.items()
        )
        os.makedirs(out)
        with open_store(store_uri) as store:
            submit_urls(store, [web.base_url(h) for h in web.hosts], int(time.time() * 1000))
        seeded = _frontier(store_uri)
        common = [
            "crawl", "--out", str(out), "--store", store_uri, "--resolve", "*=127.0.0.1",
            "--allow-private-networks", "--min-delay", "0.3", "--round-window", "4", *runner,
        ]  # fmt: skip
        env = {"BEAMCRAWL_FAIL_ELEMENT": faults}
        round1 = _cli(common, env)
        after1 = _frontier(store_uri)
        round2 = _cli(common, env)
        after2 = _frontier(store_uri)
        before3 = len(web.requests())
        round3 = _cli(common)
        requests3 = web.requests()[before3:]
        released_url = _cli(["hosts", "release", f"http://{target['parse']}/", "--store", store_uri])
        released_host = _cli(["hosts", "release", target["assign_slots"], "--store", store_uri])
        show = _cli(["hosts", "show", target["store"], "--store", store_uri])
        export = _cli(["export", "quarantine", "--out", str(work / "export"), "--store", store_uri])
        after_release = _frontier(store_uri)
        before4 = len(web.requests())
        round4 = _cli(common)
        requests4 = web.requests()[before4:]
        infra = _cli(common, {"BEAMCRAWL_FAIL_ELEMENT": "record:http:infra"})
    return {
        "out": out, "store": store_uri, "target": target, "controls": controls, "seeded": seeded,
        "round1": round1, "after1": after1, "round2": round2, "after2": after2, "round3": round3,
        "requests3": requests3, "released_url": released_url, "released_host": released_host, "show": show,
        "export": export, "export_dir": work / "export", "after_release": after_release, "round4": round4,
        "requests4": requests4, "infra": infra,
    }  # fmt: skip


def _report(run, n: int) -> dict:
    with open(run["out"] / "reports" / f"round-{n:06d}.json") as fh:
        return json.load(fh)


def _errors(run, n: int) -> list[dict]:
    return pq.read_table(run["out"] / "errors" / f"round={n}").to_pylist()


def _seed_rows(rows: dict, hostport: str) -> dict:
    root = f"http://{hostport}/"
    return {k: v for k, v in rows.items() if FrontierEntry.from_cells(v).url == root}


def test_rounds_with_failing_elements_complete(run):
    for name in ("round1", "round2", "round3", "round4"):
        assert run[name].returncode == 0, (name, run[name].stderr[-3000:])
    assert "set aside" in run["round1"].stdout


@pytest.mark.parametrize("stage", URL_STAGES + HOST_STAGES)
def test_a_failing_element_is_counted_and_dead_lettered(run, stage):
    hostport = run["target"][stage]
    metrics = _report(run, 1)["metrics"]
    assert metrics.get(f"errors/{stage}/InjectedFault", 0) >= 1
    assert _report(run, 1)["errors_by_stage"].get(f"{stage}/InjectedFault", 0) >= 1
    mine = [e for e in _errors(run, 1) if e["stage"] == stage and e["exception"] == "InjectedFault"]
    if stage in URL_STAGES:
        assert any(e["url"] == f"http://{hostport}/" for e in mine), mine
    else:
        assert any(e["host"] == hostport for e in mine), mine
    assert all("injected fault" in e["message"] and "Traceback" in e["traceback"] for e in mine)


@pytest.mark.parametrize("stage", URL_STAGES + HOST_STAGES)
def test_the_failed_elements_frontier_row_is_left_as_it_was(run, stage):
    hostport = run["target"][stage]
    seeded = _seed_rows(run["seeded"], hostport)
    assert len(seeded) == 1
    # The row is there, key and cells as seeded (a recorded fetch may have queued a next
    # visit beside it: the two fold at slot assignment).
    assert seeded.items() <= _seed_rows(run["after1"], hostport).items()


def test_the_rest_of_the_round_is_intact(run):
    pages = pq.read_table(run["out"] / "pages" / "round=1").to_pylist()
    fetched = {p["url"] for p in pages if p["status"] == 200}
    warc = set(_warc_responses(run["out"]))
    links = {r["src"] for r in pq.read_table(run["out"] / "links" / "round=1", columns=["src"]).to_pylist()}
    for hostport in run["controls"]:
        root = f"http://{hostport}/"
        assert root in fetched and root in warc and root in links
        assert not set(_seed_rows(run["seeded"], hostport)) & set(run["after1"])  # finished as usual


def test_an_element_failing_in_two_rounds_is_quarantined(run):
    quarantined = set(_report(run, 2)["quarantined"])
    for stage in URL_STAGES:
        url = f"http://{run['target'][stage]}/"
        assert f"url {url}" in quarantined, stage
        # Its frontier row stays (nothing lost); select holds it.
        seeded = _seed_rows(run["seeded"], run["target"][stage])
        assert seeded.items() <= _seed_rows(run["after2"], run["target"][stage]).items(), stage
    for stage in HOST_STAGES:
        assert f"host {run['target'][stage]}" in quarantined, stage


def test_quarantined_elements_are_not_fetched_until_released(run):
    assert run["round3"].returncode == 0
    asked = {(r.get("host"), r.get("path")) for r in run["requests3"]}
    hosts3 = {r.get("host", "").split(":")[0] for r in run["requests3"]}
    for stage in URL_STAGES:
        host = run["target"][stage].split(":")[0]
        assert (host, "/") not in asked, stage
    for stage in HOST_STAGES:  # quarantined hosts: held like paused ones, nothing requested
        assert run["target"][stage].split(":")[0] not in hosts3, stage
    assert hosts3  # the others were crawled
    report = _report(run, 3)
    assert report["errors"] == 0  # no faults this round: held, not failed
    assert report["metrics"].get("assign_slots/hosts_paused", 0) >= len(HOST_STAGES)


def test_hosts_show_and_export_list_the_quarantine(run):
    assert run["show"].returncode == 0, run["show"].stderr
    shown = json.loads(run["show"].stdout)
    assert [q["id"] for q in shown["quarantine"]] == [f"http://{run['target']['store']}/"]
    assert run["export"].returncode == 0, run["export"].stderr
    rows = pq.read_table(run["export_dir"] / "quarantine").to_pylist()
    ids = {r["id"] for r in rows if r["quarantined"]}
    assert {f"http://{run['target'][s]}/" for s in URL_STAGES} - {f"http://{run['target']['parse']}/"} <= ids
    assert run["target"]["budgets"] in ids
    assert all(r["failed_rounds"] >= 2 and r["first_round"] == 1 for r in rows if r["quarantined"])


def test_release_puts_the_url_and_the_host_back(run):
    assert run["released_url"].returncode == 0, run["released_url"].stderr
    assert run["released_host"].returncode == 0, run["released_host"].stderr
    assert _report(run, 3)["metrics"].get("select/quarantined_rows", 0) >= len(URL_STAGES)
    asked = {(r.get("host"), r.get("path")) for r in run["requests4"]}
    assert (run["target"]["parse"].split(":")[0], "/") in asked
    assert run["target"]["assign_slots"].split(":")[0] in {h for h, _ in asked}


def test_an_infrastructure_failure_fails_the_round_and_commits_nothing(run):
    infra = run["infra"]
    assert infra.returncode == 1
    assert "beamcrawl crawl: error: round 5 failed and committed nothing" in infra.stderr
    assert not os.path.exists(run["out"] / "reports" / "round-000005.json")


def test_an_infrastructure_failure_fails_the_round_with_one_line(run):
    infra = run["infra"]
    assert infra.returncode == 1
    # The live progress lines ("round 5 [writes] ... | errors 0 | ...") name their error count;
    # one is printed whenever the round is slow enough to reach a progress tick.
    errors = [
        line
        for line in infra.stderr.splitlines()
        if "error" in line.lower() and not re.match(r"round \d+ \[\w+\] ", line)
    ]
    assert len(errors) == 1, infra.stderr[-3000:]
    assert errors[0].startswith("beamcrawl crawl: error: round 5 failed and committed nothing")
    assert "InjectedInfrastructureFault" in errors[0]
    assert "Traceback" not in infra.stderr
    assert not os.path.exists(run["out"] / "reports" / "round-000005.json")
    # The whole traceback (on a portable runner, the worker's) is in the log the line names.
    log = errors[0].rsplit("(traceback in ", 1)[1].rstrip(")")
    with open(log, encoding="utf-8") as fh:
        kept = fh.read()
    assert "Traceback (most recent call last):" in kept and "InjectedInfrastructureFault" in kept
