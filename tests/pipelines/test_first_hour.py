"""A newcomer's first hour (issue 19, items 1-10) and seeds checked when given (issue 16).

Each test runs the command as a user does, through a subprocess, and checks what the user
sees (one line per problem, the exit status) and what is left on disk.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamcrawl.schemas.records import FrontierEntry, HostRecord
from beamcrawl.simweb.testing import running_simweb
from beamcrawl.stores.base import Mutation, StoreError, open_store
from thread_signals import (
    alive,
    stop_signals_as_from_a_terminal,
    tgkill,
    settled_threads_taking,
)  # tests/thread_signals.py

MAX_REPORTED = 50  # core/seedfile.MAX_REPORTED (checked below)

CLI = [sys.executable, "-m", "beamcrawl.cli.main"]
# Where a crawl is expected to be refused, these keep a regression that runs it anyway on
# loopback: every name maps to 127.0.0.1, so no DNS lookup and no address outside the machine.
LOOPBACK_ONLY = ("--resolve", "*=127.0.0.1", "--allow-private-networks")


def run(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def no_cloud_env(tmp_path: Path) -> dict[str, str]:
    """An environment where Google's libraries find no credentials and never reach the
    network looking for them: no key file, an empty gcloud folder, no emulator, the GCE
    metadata server (which they would probe) pointed at a closed port on loopback, and Cloud
    Storage too (so a regression that writes to gs:// anyway stays on the machine)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GOOGLE_APPLICATION_CREDENTIALS", "BIGTABLE_EMULATOR_HOST")}
    gcloud = tmp_path / "gcloud-config"
    gcloud.mkdir(exist_ok=True)
    env.update(
        CLOUDSDK_CONFIG=str(gcloud), NO_GCE_CHECK="True",
        GCE_METADATA_HOST="127.0.0.1:1", GCE_METADATA_IP="127.0.0.1:1", GCE_METADATA_ROOT="127.0.0.1:1",
        STORAGE_EMULATOR_HOST="http://127.0.0.1:1",
    )  # fmt: skip
    return env


# --- 1. demo --out never empties a folder it did not write ------------------------------------


def test_demo_refuses_a_folder_that_is_not_a_previous_demo(tmp_path):
    mine = tmp_path / "mine"
    (mine / "sub").mkdir(parents=True)
    (mine / "thesis.txt").write_text("four years of work\n")
    (mine / "sub" / "data.csv").write_text("a,b\n1,2\n")
    before = tree(mine)
    proc = run("demo", "--out", str(mine), "--hosts", "5", "--rounds", "1")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("beamcrawl demo: error:") and "not empty and not a previous demo's output" in lines[0]
    assert tree(mine) == before

    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me\n")
    proc = run("demo", "--out", str(a_file))
    assert proc.returncode == 2 and "not a folder" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert a_file.read_text() == "keep me\n"


def test_demo_replaces_only_its_own_output(tmp_path):
    from beamcrawl.cli.demo import MARKER, DemoError, prepare_out

    out = tmp_path / "demo-out"
    prepare_out(str(out))  # new folder: created, with the marker
    assert (out / MARKER).is_file()
    (out / "warc").mkdir()
    (out / "warc" / "old.warc.gz").write_bytes(b"x")
    prepare_out(str(out))  # a previous demo's output: replaced
    assert sorted(p.name for p in out.iterdir()) == [MARKER]
    (out / MARKER).unlink()
    (out / "thesis.txt").write_text("mine")
    with pytest.raises(DemoError):
        prepare_out(str(out))
    assert (out / "thesis.txt").read_text() == "mine"
    empty = tmp_path / "empty"
    empty.mkdir()
    prepare_out(str(empty))  # an empty folder is fine
    assert (empty / MARKER).is_file()


# --- 2. unknown --store schemes ------------------------------------------------------------------


@pytest.mark.parametrize("store", ["mysql://foo/bar", "gs://bucket/x", "s3://b/k"])
def test_unknown_store_scheme_is_refused_naming_the_accepted_forms(tmp_path, store):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://ok.example/\n")
    proc = run("crawl", "--seeds", str(seeds), "--out", "out", "--store", store, *LOOPBACK_ONLY, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("beamcrawl crawl: error:") and store in lines[0]
    for form in ("sqlite:///PATH", "a folder", "bigtable://PROJECT/INSTANCE[/PREFIX]"):
        assert form in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seeds.txt"]  # nothing created


def test_plain_paths_and_known_schemes_stay_accepted(tmp_path):
    from beamcrawl.stores.base import check_store_uri

    for uri in (str(tmp_path / "state"), "relative/folder", f"sqlite:///{tmp_path}/s.sqlite", "bigtable://p/i/x"):
        assert check_store_uri(uri) == uri
    with pytest.raises(StoreError, match="sqlite:///PATH, a folder, or bigtable://"):
        open_store("mysql://foo/bar")
    assert not Path("mysql:").exists()
    open_store(str(tmp_path / "state")).close()  # a plain folder opens the embedded store
    assert (tmp_path / "state" / "store.sqlite").is_file()


# --- 3. inline comments in seeds and submit files ------------------------------------------------


@pytest.mark.parametrize(
    "line, url",
    [
        ("http://ok.example/ # trailing comment", "http://ok.example/"),
        ("http://ok.example/\t# tab, then a comment", "http://ok.example/"),
        ("  # only a comment", ""),
        ("http://ok.example/#top", "http://ok.example/#top"),  # a fragment, not a comment
        ("http://ok.example/a#b # c", "http://ok.example/a#b"),
        ("", ""),
    ],
)
def test_hash_after_whitespace_starts_a_comment(line, url):
    from beamcrawl.core.urls.seedfile import strip_comment

    assert strip_comment(line) == url


def test_inline_comment_is_not_part_of_a_seed_or_submitted_url(tmp_path):
    from beamcrawl.pipelines.seeding import read_seeds

    listing = tmp_path / "urls.txt"
    listing.write_text("http://ok.example/ # trailing comment\nhttp://two.example/a\t# why\n")
    assert read_seeds(str(listing)) == ["http://ok.example/", "http://two.example/a"]

    crawl = tmp_path / "crawl"
    open_store(f"sqlite:///{crawl}/store.sqlite").close()
    proc = run("submit", "--file", str(listing), "--priority", "normal", "--reason", "seeds", "--crawl", str(crawl))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"accepted": 2, "duplicates": 0, "rejected": []}
    with open_store(f"sqlite:///{crawl}/store.sqlite") as store:
        urls = sorted(FrontierEntry.from_cells(cells).url for _, cells in store.read_range("frontier"))
    assert urls == ["http://ok.example/", "http://two.example/a"]


# --- 4, 5 and issue 16: every bad seed line, empty files, refused addresses -----------------------


def test_every_bad_seed_line_is_reported_in_one_run(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(
        "http://ok.example/\n"
        "not a url\n"
        "# a comment\n"
        "ftp://files.example/\n"
        "http://ok.example/a/a/a/x\n"
        "http://169.254.169.254/latest/meta-data/\n"
        "http://127.0.0.1:9/\n"
        "http://[fe80::1]/\n"
        "http://two.example/ # fine\n"
    )
    out = tmp_path / "out"
    proc = run("crawl", "--seeds", str(seeds), "--out", str(out), *LOOPBACK_ONLY)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert [line.split(": error: ", 1)[1].split(":")[1] for line in lines] == ["2", "4", "5", "6", "8"], proc.stderr
    assert all(line.startswith(f"beamcrawl crawl: error: {seeds}:") for line in lines)
    assert "refused: 'http://169.254.169.254/latest/meta-data/': link-local address" in lines[3]
    assert "cloud metadata endpoint" in lines[3]
    assert "refused: 'http://[fe80::1]/': link-local address" in lines[4]  # with the flag too
    assert not out.exists()


def test_loopback_seeds_are_refused_without_the_flag(tmp_path):
    """Only loopback literals here: a regression that crawled them would stay on the machine."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/\n# ok\nhttp://[::1]:9/ # v6\nhttp://0x7f000001:9/\n")
    out = tmp_path / "out"
    proc = run("crawl", "--seeds", str(seeds), "--out", str(out))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 3, proc.stderr
    assert f"{seeds}:1: refused: 'http://127.0.0.1:9/': loopback address 127.0.0.1" in lines[0]
    assert f"{seeds}:3: refused: 'http://[::1]:9/': loopback address ::1" in lines[1]
    assert f"{seeds}:4: refused: 'http://0x7f000001:9/': loopback address 127.0.0.1" in lines[2]
    assert all("--allow-private-networks" in line for line in lines)
    assert not out.exists()


def test_bad_seed_report_is_capped(tmp_path):
    from beamcrawl.core.urls import seedfile

    assert seedfile.MAX_REPORTED == MAX_REPORTED
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"bad seed {i}\n" for i in range(MAX_REPORTED + 10)))
    proc = run("crawl", "--seeds", str(seeds), "--out", str(tmp_path / "out"), *LOOPBACK_ONLY)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == MAX_REPORTED + 1
    assert lines[-1] == "beamcrawl crawl: error: ... and 10 more bad line(s)"
    assert f"{seeds}:{MAX_REPORTED}: bad seed" in lines[-2]


@pytest.mark.parametrize("text", ["", "\n\n", "# only comments\n   # and another\n\n"])
def test_empty_seeds_file_is_an_error(tmp_path, text):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(text)
    proc = run("crawl", "--seeds", str(seeds), "--out", str(tmp_path / "out"), *LOOPBACK_ONLY)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "holds no URL" in lines[0] and str(seeds) in lines[0], proc.stderr
    assert not (tmp_path / "out").exists()


GOOD = st.sampled_from(
    ["http://a.example/", "https://b.example/x?q=1", "http://c.example:8080/p#frag", "http://8.8.8.8/"]
)
BAD = st.sampled_from(
    ["not a url", "ftp://x.example/", "http://169.254.169.254/", "http://10.0.0.7/", "http://[::1]/",
     "http://[fe80::1]/", "http://0x7f000001/", "mailto:a@b.example", "http://ok.example/a/a/a/a/"]
)  # fmt: skip
COMMENT = st.sampled_from(["# a comment", "   # indented", "#", "# http://x.example/"])
BLANK = st.sampled_from(["", "   ", "\t"])
TRAILING = st.sampled_from(["", " # why", "\t# tab comment", "   "])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(
    st.tuples(st.just("good"), GOOD, TRAILING), st.tuples(st.just("bad"), BAD, TRAILING),
    st.tuples(st.just("skip"), st.one_of(COMMENT, BLANK), st.just("")),
), max_size=40))  # fmt: skip
def test_reported_line_numbers_are_exactly_the_bad_ones(tmp_path, lines):
    from beamcrawl.pipelines.seeding import SeedsError, read_seeds

    path = tmp_path / "seeds.txt"
    path.write_text("".join(f"{text}{tail}\n" for _, text, tail in lines))
    bad = [n for n, (kind, _, _) in enumerate(lines, 1) if kind == "bad"]
    good = [text for kind, text, _ in lines if kind == "good"]
    try:
        seeds = read_seeds(str(path))
    except SeedsError as exc:
        reported = [int(line.split(":")[1]) for line in exc.lines if line.startswith(str(path))]
        assert reported == bad or (not bad and not good and reported == [])
        if not bad:
            assert not good and "holds no URL" in str(exc)
        for line, number in zip(exc.lines, bad):
            assert ("refused: " in line) == (lines[number - 1][1] in REFUSED), line
    else:
        assert not bad and seeds == good


REFUSED = {"http://169.254.169.254/", "http://10.0.0.7/", "http://[::1]/", "http://[fe80::1]/", "http://0x7f000001/"}


def test_submit_rejects_refused_addresses(tmp_path):
    crawl = tmp_path / "crawl"
    open_store(f"sqlite:///{crawl}/store.sqlite").close()
    listing = tmp_path / "urls.txt"
    listing.write_text("http://ok.example/\n# c\nhttp://169.254.169.254/latest/ # metadata\nhttp://127.0.0.1:9/\n")
    proc = run("submit", "--file", str(listing), "--priority", "high", "--reason", "x", "--crawl", str(crawl))
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["accepted"] == 1
    assert [r["url"] for r in answer["rejected"]] == ["http://169.254.169.254/latest/", "http://127.0.0.1:9/"]
    assert all(r["reason"].startswith("refused: ") for r in answer["rejected"])
    assert proc.stderr.splitlines() == [
        f"beamcrawl submit: {listing}:3: rejected 'http://169.254.169.254/latest/': {answer['rejected'][0]['reason']}",
        f"beamcrawl submit: {listing}:4: rejected 'http://127.0.0.1:9/': {answer['rejected'][1]['reason']}",
    ]
    with open_store(f"sqlite:///{crawl}/store.sqlite") as store:
        assert [FrontierEntry.from_cells(c).url for _, c in store.read_range("frontier")] == ["http://ok.example/"]
    again = run("submit", "http://127.0.0.1:9/", "--priority", "high", "--reason", "x", "--crawl", str(crawl),
                "--allow-private-networks")  # fmt: skip
    assert json.loads(again.stdout)["accepted"] == 1


# --- 6, 7. Google Cloud without credentials ---------------------------------------------------------


def test_bigtable_without_credentials_is_one_line_and_leaves_no_out(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://ok.example/\n")
    out = tmp_path / "out"
    proc = run("crawl", "--seeds", str(seeds), "--out", str(out), "--store", "bigtable://proj/inst", *LOOPBACK_ONLY,
               env=no_cloud_env(tmp_path))  # fmt: skip
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for needle in ("no Google Cloud credentials", "gcloud auth application-default login",
                   "GOOGLE_APPLICATION_CREDENTIALS", "BIGTABLE_EMULATOR_HOST"):  # fmt: skip
        assert needle in lines[0]
    assert not out.exists()

    init = run("store", "init", "--store", "bigtable://proj/inst", env=no_cloud_env(tmp_path))
    lines = init.stderr.strip().splitlines()
    assert init.returncode == 1 and len(lines) == 1, init.stderr
    assert lines[0].startswith("beamcrawl store: error: ") and "BIGTABLE_EMULATOR_HOST" in lines[0]


def test_gcs_out_without_credentials_fails_at_once_in_one_line(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://ok.example/\n")
    proc = run("crawl", "--seeds", str(seeds), "--out", "gs://beamcrawl-test-bucket/x", "--runner", "FnApiRunner",
               *LOOPBACK_ONLY, env=no_cloud_env(tmp_path), timeout=120)  # fmt: skip
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "gs://beamcrawl-test-bucket/x" in lines[0] and "no Google Cloud credentials" in lines[0]


# --- 8. Ctrl-C during a round ---------------------------------------------------------------------------


def test_ctrl_c_mid_round_is_one_line_rc_130_and_the_rerun_resumes(tmp_path):
    with running_simweb(tmp_path / "web", hosts=20) as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.base_url(h) for h in web.hosts) + "\n")
        out = tmp_path / "out"
        common = ["crawl", "--seeds", str(seeds), "--out", str(out), "--resolve", "*=127.0.0.1",
                  "--allow-private-networks", "--min-delay", "0.05", "--runner", "FnApiRunner"]  # fmt: skip
        child = subprocess.Popen(
            [*CLI, *common, "--round-window", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=stop_signals_as_from_a_terminal,
        )  # fmt: skip
        deadline = time.monotonic() + 180
        while (len([r for r in web.requests(sync=False) if "beamcrawl" in r.get("ua", "")]) < 25
               and child.poll() is None and time.monotonic() < deadline):  # fmt: skip
            time.sleep(0.05)  # robots.txt for every host, then pages: the round is fetching
        assert child.poll() is None, "the round ended before it could be interrupted"
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=120)
        assert child.returncode == 130
        assert stderr.strip().splitlines() == [
            "beamcrawl crawl: interrupted; round 1 was not committed, rerun to redo it"
        ]
        assert "round 1: running" in stdout
        assert not (out / "reports" / "round-000001.json").exists()

        rerun = run(*common, "--round-window", "3")
        assert rerun.returncode == 0, rerun.stderr
        assert "round 1:" in rerun.stdout and (out / "reports" / "round-000001.json").exists()
        report = json.loads((out / "reports" / "round-000001.json").read_text())
        assert report["responses"] > 0


# --- 9. building Prism: says so, and an interrupted build leaves nothing -------------------------------


@pytest.mark.parametrize("thread", ["main", "other"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_prism_build_says_what_it_does_and_leaves_nothing(tmp_path, sig, thread):
    """A slow ``go`` first on PATH stands in for the toolchain (the real build needs the
    module proxy); the cache is a folder of the test's own, never the shared one.

    The signal is aimed at the CLI's main thread, then at another of its threads (numpy's
    BLAS thread, say), as the kernel may choose for a Ctrl-C: CPython acts on it on the main
    thread only, which once sat in ``poll`` until the whole build ended."""
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    started = tmp_path / "go-started"
    go = fake_bin / "go"
    go.write_text(f"#!/bin/sh\necho $$ > '{started}.tmp'; mv '{started}.tmp' '{started}'\nexec sleep 120\n")
    go.chmod(0o755)
    cache = tmp_path / "cache"
    env = dict(os.environ, PATH=f"{fake_bin}{os.pathsep}{os.environ['PATH']}", BEAMCRAWL_CACHE=str(cache))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://ok.example/\n")
    out = tmp_path / "out"
    child = subprocess.Popen([*CLI, "crawl", "--seeds", str(seeds), "--out", str(out), "--runner", "PrismRunner", *LOOPBACK_ONLY],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             preexec_fn=stop_signals_as_from_a_terminal)  # fmt: skip
    deadline = time.monotonic() + 120
    while not started.exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child.poll() is None and started.exists(), child.stderr.read() if child.stderr else ""
    assert list((cache / "bin").glob(".prism-build-*")), "the build's staging folder should exist while it runs"
    targets = settled_threads_taking(child.pid, sig)
    assert targets[0] == child.pid and len(targets) >= 2, targets  # the main thread, and more
    tgkill(child.pid, targets[0] if thread == "main" else targets[-1], sig)
    _, stderr = child.communicate(timeout=60)
    lines = stderr.strip().splitlines()
    assert lines[0].startswith("building the Prism runner") and "go install" in lines[0]
    assert lines[1:] == ["beamcrawl crawl: interrupted before the first round"]
    assert child.returncode == 130
    assert list((cache / "bin").iterdir()) == []  # no .prism-build-*, no half binary
    assert not out.exists()
    go_pid = int(started.read_text())
    deadline = time.monotonic() + 10
    while alive(go_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(go_pid), "the interrupted build's go kept running"


# --- 10. small CLI slips ------------------------------------------------------------------------------


def test_robots_check_says_invalid_for_what_is_no_url(tmp_path):
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: *\nDisallow: /private\n")
    proc = run(
        "robots-check",
        "--robots",
        str(robots),
        "--agent",
        "beamcrawl",
        "notaurl",
        "/relative",
        "http://e.com/private/x",
    )
    assert proc.returncode == 0
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    assert [r[:2] for r in rows] == [
        ["invalid", "notaurl"],
        ["invalid", "/relative"],
        ["disallowed", "http://e.com/private/x"],
    ]
    assert rows[0][2] and rows[1][2] and len(rows[2]) == 2


def test_normalize_prints_the_input_of_an_invalid_url():
    proc = run("normalize", "not a url", "http://Example.com/")
    first, second = (line.split("\t") for line in proc.stdout.splitlines())
    assert first[0] == "invalid" and first[1] == "missing scheme" and first[2] == "not a url"
    assert len(second) == 2 and second[1] == "http://example.com/"


def test_hosts_show_prints_iso_times_and_refuses_an_unknown_host(tmp_path):
    with open_store(f"sqlite:///{tmp_path}/store.sqlite") as store:
        record = HostRecord(
            host="a.example", delay=1.5, last_fetch_end=1764547200.25, resolved_at=1764547200.0, ip="192.0.2.1"
        )
        store.mutate("hosts", [Mutation.set(b"a.example", record.to_cells())])
    proc = run("hosts", "show", "a.example", "--crawl", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)["record"]
    assert shown["last_fetch_end"] == "2025-12-01T00:00:00.250Z" and shown["resolved_at"] == "2025-12-01T00:00:00.000Z"
    assert shown["not_before"] is None and shown["delay"] == 1.5  # 0 is "never"; a delay is no time

    unknown = run("hosts", "show", "nobody.example", "--crawl", str(tmp_path))
    assert unknown.returncode == 1 and unknown.stdout == ""
    assert unknown.stderr.strip().splitlines() == [
        "beamcrawl hosts show: error: no host nobody.example in this crawl (neither a record nor a policy)"
    ]


def test_out_naming_a_file_says_not_a_folder(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://ok.example/\n")
    proc = run("crawl", "--seeds", str(seeds), "--out", str(seeds), *LOOPBACK_ONLY)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "is a file, not a folder" in lines[0]
    assert seeds.read_text() == "http://ok.example/\n"

    crawl = tmp_path / "crawl"
    open_store(f"sqlite:///{crawl}/store.sqlite").close()
    proc = run("export", "urls", "--out", str(seeds), "--crawl", str(crawl))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and lines == [f"beamcrawl export: error: --out {seeds} is a file, not a folder"]


@pytest.mark.parametrize(
    "args, prefix",
    [
        (
            ["robots-check", "--robots", "/nonexistent/robots.txt", "--agent", "a", "http://a.example/"],
            "beamcrawl robots-check: error: ",
        ),
        (["crawl", "--out", "{tmp}/o", "--seeds", "{tmp}/missing.txt"], "beamcrawl crawl: error: "),
        (["hosts", "show", "a.example", "--crawl", "{tmp}/nowhere"], "beamcrawl hosts show: error: "),
        (
            ["submit", "http://a.example/", "--priority", "x", "--reason", "r", "--crawl", "{tmp}"],
            "beamcrawl submit: error: ",
        ),
        (["demo", "--out", "{tmp}"], "beamcrawl demo: error: "),
        (["nosuch"], "beamcrawl: error: "),
    ],
)
def test_error_prefixes_are_uniform(tmp_path, args, prefix):
    (tmp_path / "keep.txt").write_text("x")
    proc = run(*[a.format(tmp=tmp_path) for a in args])
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith(prefix), proc.stderr


def test_help_texts_read_as_plain_text():
    top = run("--help")
    assert top.returncode == 0 and top.stdout.startswith("usage:\n")
    assert (
        "``" not in top.stdout and ":func:" not in top.stdout and "beamcrawl crawl --seeds FILE --out DIR" in top.stdout
    )

    simweb = run("simweb", "--help")
    assert simweb.stdout.startswith("usage: beamcrawl simweb ")

    crawl = run("crawl", "--help")
    usage = crawl.stdout.split("\n\n")[0]
    assert usage.startswith("usage: beamcrawl crawl --seeds FILE --out DIR ")  # shown as required
    assert "--user-agent UA " in crawl.stdout and "CRAWLER_USER_AGENT" not in crawl.stdout
