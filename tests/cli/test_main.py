"""The CLI contract: exact output forms, quick tools without Beam, one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from beamcrawl.core.urls.urlnorm import fingerprint

CLI = [sys.executable, "-m", "beamcrawl.cli.main"]


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def test_normalize_prints_fingerprint_tab_url_or_invalid():
    proc = run("normalize", "HTTP://Example.COM:80/a/./b/../c?utm_source=x&q=1#frag", "ftp://x.org/")
    assert proc.returncode == 0
    first, second = proc.stdout.splitlines()
    fp, url = first.split("\t")
    assert url == "http://example.com/a/c?q=1"
    assert fp == format(fingerprint(url), "016x") and len(fp) == 16 and fp == fp.lower()
    assert second.startswith("invalid\t") and "scheme" in second


def test_robots_check(tmp_path):
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: beamcrawl\nDisallow: /private\nAllow: /private/ok\n\nUser-agent: *\nDisallow: /\n")
    proc = run(
        "robots-check",
        "--robots",
        str(robots),
        "--agent",
        "beamcrawl",
        "http://e.com/public",
        "http://e.com/private/x",
        "http://e.com/private/ok/1",
        "http://e.com/robots.txt",
    )
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [
        "allowed\thttp://e.com/public",
        "disallowed\thttp://e.com/private/x",
        "allowed\thttp://e.com/private/ok/1",
        "allowed\thttp://e.com/robots.txt",
    ]
    other = run("robots-check", "--robots", str(robots), "--agent", "otherbot", "http://e.com/public")
    assert other.stdout == "disallowed\thttp://e.com/public\n"


def test_quick_tools_do_not_import_beam():
    code = (
        "import sys; from beamcrawl.cli.main import main; import io, contextlib\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['normalize', 'http://a.com/'])\n"
        "print('apache_beam' in sys.modules, 'pyarrow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.strip() == "False False"


def test_quick_tools_answer(tmp_path):
    """They answer (how fast: bench/speed_claims.py)."""
    robots = tmp_path / "r.txt"
    robots.write_text("User-agent: *\nDisallow: /x\n")
    for args in (
        ("normalize", "http://a.com/b"),
        ("robots-check", "--robots", str(robots), "--agent", "a", "http://a.com/x"),
    ):
        assert run(*args).returncode == 0


@pytest.mark.parametrize(
    "args, needle",
    [
        (["crawl", "--out", "{out}", "--seeds", "{tmp}/missing.txt"], "seeds file not found"),
        (["crawl", "--out", "{out}", "--seeds", "{bad}"], "bad.txt:2: bad seed"),
        (["crawl", "--out", "{out}", "--min-delay", "fast"], "--min-delay must be a number"),
        (["crawl", "--out", "{out}", "--min-delay", "-1"], "--min-delay must be >= 0"),
        (["crawl", "--out", "{out}", "--rounds", "0"], "--rounds"),
        (["crawl", "--out", "{out}", "--resolve", "nohost"], "--resolve"),
        (["crawl", "--seeds", "{good}"], "--out is required"),
        (["crawl", "--out", "{out}", "--min-delay", "5", "--max-delay", "1", "--seeds", "{good}"], "--max-delay"),
        (["crawl", "--out", "/proc/beamcrawl-out", "--seeds", "{good}"], "not writable"),
        (["crawl", "--out", "{out}", "--seeds", "{good}", "stray"], "unexpected argument 'stray'"),
        (["crawl", "--out", "{out}", "--seeds", "{shape}"], "shape.txt:3: bad seed 'http://ok.com/a/a/a/x'"),
        (
            ["crawl", "--out", "{out}", "--seeds", "{good}", "--max-segment-repeats", "1"],
            "--max-segment-repeats must be 0",
        ),
        (
            ["crawl", "--out", "{out}", "--seeds", "{good}", "--fetch-documents=maybe"],
            "--fetch-documents must be true or false",
        ),
        (
            ["crawl", "--out", "{out}", "--seeds", "{good}", "--domain_budget_cap=5"],
            "--domain-budget-cap (5) must be >=",
        ),
        (["crawl", "--out", "{out}", "--seeds", "{good}", "--defer-base", "600", "--defer-max", "60"], "--defer-base"),
        (
            ["crawl", "--out", "{out}", "--seeds", "{good}", "--min-transfer-rate", "-5"],
            "--min-transfer-rate must be >= 0",
        ),
        (
            ["crawl", "--out", "{out}", "--seeds", "{good}", "--max-decoded-bytes", "lots"],
            "--max-decoded-bytes must be a number",
        ),
        (
            ["crawl", "--out", "{out}", "--seeds", "{good}", "--user-agent", "bot-\u00e9/1 (+https://x.example/)"],
            "--user-agent must be printable ASCII",
        ),
        (["robots-check", "--robots", "{tmp}/missing", "--agent", "a", "http://a/"], "missing"),
        (["nosuchcommand"], "unknown command"),
    ],
)
def test_bad_input_gets_one_line_error_and_nonzero_exit(tmp_path, args, needle):
    bad = tmp_path / "bad.txt"
    bad.write_text("http://ok.com/\nnot a url at all\n")
    good = tmp_path / "good.txt"
    good.write_text("http://ok.com/\n")
    shape = tmp_path / "shape.txt"
    shape.write_text("http://ok.com/\n# a trap, not a seed\nhttp://ok.com/a/a/a/x\n")
    fill = {"tmp": str(tmp_path), "out": str(tmp_path / "out"), "bad": str(bad), "good": str(good), "shape": str(shape)}
    proc = run(*[a.format(**fill) for a in args])
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0]
    assert not (tmp_path / "out").exists() or "/proc" in " ".join(args)  # nothing half-written


@pytest.mark.e2e  # a crawl in a subprocess
def test_corrupt_store_is_a_one_line_error_and_left_untouched(tmp_path):
    store = tmp_path / "store.sqlite"
    store.write_bytes(b"this is not a database" * 100)
    seeds = tmp_path / "s.txt"
    seeds.write_text("http://ok.com/\n")
    proc = run("crawl", "--out", str(tmp_path / "out"), "--store", f"sqlite:///{store}", "--seeds", str(seeds))
    assert proc.returncode != 0
    assert len(proc.stderr.strip().splitlines()) == 1 and "store" in proc.stderr
    assert store.read_bytes() == b"this is not a database" * 100


@pytest.mark.e2e  # a crawl in a subprocess
def test_a_damaged_simhash_layout_record_is_a_one_line_error_and_nothing_is_written(tmp_path):
    """The store's record of its simhash tables (state/simhash_layout.py) is read when a round
    is built: a value that is no layout stops the crawl with one line naming the meta row,
    before any page is fetched or any simhash row written."""
    from beamcrawl.stores.base import Mutation, open_store

    store = f"sqlite:///{tmp_path}/store.sqlite"
    with open_store(store) as s:
        s.mutate("meta", [Mutation.set(b"simhash", {"m:layout": b"13,13/x"})])
    seeds = tmp_path / "s.txt"
    seeds.write_text("http://ok.com/\n")
    agent = "Mozilla/5.0 (compatible; layouttest/1.0; +https://example.org/bot)"
    proc = run("crawl", "--out", str(tmp_path / "out"), "--store", store, "--seeds", str(seeds), "--user-agent", agent)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "meta row 'simhash'" in lines[0] and "'13,13/x'" in lines[0]
    with open_store(store) as s:
        assert list(s.read_range("simhash")) == []
        assert s.read_keys("meta", [b"simhash"])[b"simhash"]["m:layout"] == b"13,13/x"


@pytest.mark.e2e  # a crawl in a subprocess
def test_unreachable_bigtable_store_fails_fast_with_one_line(tmp_path):
    """A Bigtable store nobody answers for (an emulator address with nothing listening):
    one line naming the store, a non-zero exit within seconds, and no output folder."""
    import os
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the crawl starts: nothing listens
    seeds = tmp_path / "s.txt"
    seeds.write_text("http://ok.com/\n")
    env = dict(os.environ, BIGTABLE_EMULATOR_HOST=f"127.0.0.1:{port}")
    out = tmp_path / "out"
    proc = subprocess.run(
        [*CLI, "crawl", "--out", str(out), "--store", "bigtable://p/i", "--seeds", str(seeds)],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "bigtable://p/i" in lines[0] and f"127.0.0.1:{port}" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize(
    "typo, meant",
    [
        (["--block-list", "{tmp}/block.txt"], "--blocklist"),
        (["--min-dealy", "0.5"], "--min-delay"),
        (["--roundwindow", "5"], "--round-window"),
        (["--exit_when_idle"], "--exit-when-idle"),
    ],
)
def test_a_mistyped_option_is_refused_before_anything_is_created(tmp_path, typo, meant):
    """Issue #27: Beam only warned about these and the crawl ran on without them (no blocklist,
    the default delay), exit 0."""
    (tmp_path / "block.txt").write_text("a.example\n")
    out = tmp_path / "out"
    proc = run("crawl", "--out", str(out), *[a.format(tmp=tmp_path) for a in typo])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"beamcrawl crawl: error: unknown option {typo[0]}; did you mean {meant}?"]
    assert not out.exists()


def test_an_unknown_runner_is_named_with_the_known_ones(tmp_path):
    out = tmp_path / "out"
    proc = run("crawl", "--out", str(out), "--runner", "FlinkRuner")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("beamcrawl crawl: error: unknown runner 'FlinkRuner'; did you mean FlinkRunner?")
    assert all(name in line for name in ("FnApiRunner", "PrismRunner", "DataflowRunner", "FlinkRunner"))
    assert "cannot reach" not in line and not out.exists()
