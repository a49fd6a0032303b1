"""Offline checks of the Dataflow Flex Template: its parameters are the pipeline's options,
each typed, described and validated, and the image pins the same Beam as setup.py."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from beamcrawl.cli.args import add_crawl_arguments

ROOT = Path(__file__).resolve().parents[2]
METADATA = ROOT / "templates" / "crawl_round" / "metadata.json"
# Options that only make sense on one machine or in tests, never in a scheduled cloud round.
LOCAL_ONLY = {"resolve", "allow_private_networks"}
# Template parameters that are not crawl options but inputs of the launch.
LAUNCH_ONLY = {"seeds"}


def crawl_option_dests() -> set[str]:
    parser = argparse.ArgumentParser()
    add_crawl_arguments(parser)
    return {a.dest for a in parser._actions if a.dest != "help"}


@pytest.fixture(scope="module")
def metadata() -> dict:
    return json.loads(METADATA.read_text())


def test_every_pipeline_option_is_a_template_parameter_and_back(metadata):
    names = {p["name"] for p in metadata["parameters"]}
    assert names - LAUNCH_ONLY == crawl_option_dests() - LOCAL_ONLY


def test_every_parameter_is_labelled_described_and_validated(metadata):
    assert metadata["name"] and metadata["description"]
    for p in metadata["parameters"]:
        assert p["label"] and len(p["helpText"]) > 20, p["name"]
        assert p.get("paramType"), p["name"]
        assert p.get("regexes"), p["name"]
        for rx in p["regexes"]:
            re.compile(rx)
    required = {p["name"] for p in metadata["parameters"] if not p.get("isOptional")}
    assert required == {"out", "store"}


@pytest.mark.parametrize(
    "name, good, bad",
    [
        ("out", ["gs://b/crawl"], ["/local/path", "s3://b/x"]),
        ("store", ["bigtable://my-proj/my-inst", "bigtable://my-proj/my-inst/crawl1"], ["sqlite:///x", "bigtable://p"]),
        ("min_delay", ["1", "0.5"], ["-1", "fast"]),
        ("fetch_shards", ["16"], ["0", "x"]),
        ("robots_token", ["beamcrawl"], ["beam crawl", "a/1.0"]),
        ("domain_budgets", ["true", "false", "off"], ["maybe", ""]),
        ("max_segment_repeats", ["0", "2", "3"], ["1", "-1"]),
        ("budget_period", ["86400", "3600.5"], ["0", "0.5", "-5"]),
    ],
)
def test_regexes_accept_and_refuse(metadata, name, good, bad):
    (param,) = [p for p in metadata["parameters"] if p["name"] == name]
    for value in good:
        assert any(re.fullmatch(rx, value) for rx in param["regexes"]), value
    for value in bad:
        assert not any(re.fullmatch(rx, value) for rx in param["regexes"]), value


def test_template_parameters_parse_as_pipeline_flags(metadata):
    """The launcher passes each parameter as --name=value: the round's entry point must accept
    them as its options (none left over for Beam, where a misspelling would be refused)."""
    from beamcrawl.cli.args import config_from_args
    from beamcrawl.pipelines.options import unknown_argument
    from beamcrawl.pipelines.template import round_parser

    flags = [
        "--out=gs://b/crawl",
        "--store=bigtable://my-proj/my-inst",
        "--min_delay=2",
        "--round_window=30",
        "--fetch_shards=8",
        "--robots_token=examplebot",
        "--domain_budgets=false",
        "--fetch_documents=true",
        "--max_new_hosts_per_domain=5",
        "--min_transfer_rate=512",
    ]
    parser = round_parser()
    args, rest = parser.parse_known_args(flags)
    assert rest == [] and unknown_argument(rest, parser) is None
    cfg = config_from_args(args)
    assert (cfg.out, cfg.store, cfg.min_delay, cfg.round_window, cfg.fetch_shards, cfg.robots_token) == (
        "gs://b/crawl",
        "bigtable://my-proj/my-inst",
        2.0,
        30.0,
        8,
        "examplebot",
    )
    assert (cfg.domain_budgets, cfg.fetch_documents, cfg.max_new_hosts_per_domain, cfg.min_transfer_rate) == (
        False,
        True,
        5,
        512.0,
    )


def test_dockerfile_and_setup_pin_the_same_beam():
    setup = (ROOT / "setup.py").read_text()
    (pinned,) = re.findall(r'BEAM_VERSION = "([0-9.]+)"', setup)
    docker = (ROOT / "Dockerfile").read_text()
    images = re.findall(r"apache/beam_python3\.\d+_sdk:([0-9.]+)", docker)
    assert images and set(images) == {pinned}
    import apache_beam

    assert apache_beam.__version__ == pinned


def test_a_launch_while_a_round_runs_exits_cleanly_and_touches_nothing(tmp_path):
    """The scheduled job's contract: the previous round still holds the lease → exit 0."""
    import json
    import time

    from beamcrawl.pipelines import template
    from beamcrawl.stores.base import Mutation, open_store

    out = tmp_path / "crawl"
    store_uri = f"sqlite:///{out}/store.sqlite"
    held = {"owner": "other-machine:1:abc", "acquired": time.time(), "expires": time.time() + 600}
    with open_store(store_uri) as store:
        store.mutate("meta", [Mutation.set(b"lease", {"m:lease": json.dumps(held).encode()})])
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.com/\n")
    assert template.run(["--out", str(out), "--seeds", str(seeds), "--runner", "FnApiRunner"]) == 0
    with open_store(store_uri) as store:
        assert list(store.read_range("frontier")) == []  # nothing queued, no round run
        assert json.loads(store.read_keys("meta", [b"lease"])[b"lease"]["m:lease"]) == held
    assert not (out / "reports").exists()


def test_template_entry_refuses_the_embedded_store_on_dataflow(tmp_path, capsys):
    from beamcrawl.pipelines import template

    code = template.run(["--out", "gs://b/crawl", "--runner", "DataflowRunner"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bigtable://" in err[0]


def test_crawl_options_live_beside_every_beam_option():
    """The crawl's --user-agent must not clash with Beam's own --user_agent (it once did): the
    crawl's goes to the crawler, Beam's passes through to Beam as one of its options."""
    from beamcrawl.pipelines.options import unknown_argument
    from beamcrawl.pipelines.template import round_parser

    parser = round_parser()
    args, rest = parser.parse_known_args(["--user_agent=beam-reporting/1", "--user-agent=crawler/1"])
    assert args.crawler_user_agent == "crawler/1"
    assert (
        rest == ["--user_agent=beam-reporting/1"] and unknown_argument(rest, parser) is None
    )  # Beam's, for Google APIs


def test_a_launch_with_nothing_due_exits_cleanly_without_a_round(tmp_path):
    """A scheduled launch when every queued URL falls due later: one line, exit 0, no job."""
    import subprocess
    import sys
    import time

    from beamcrawl.pipelines.commit import next_round
    from beamcrawl.schemas.records import FrontierEntry
    from beamcrawl.stores.base import Mutation, open_store

    out = tmp_path / "crawl"
    store_uri = f"sqlite:///{out}/store.sqlite"
    later = FrontierEntry(url="http://example.com/", fp=7, host="example.com", due_ms=int((time.time() + 3600) * 1000))
    with open_store(store_uri) as store:
        store.mutate("frontier", [Mutation.set(later.key, later.to_cells())])
    cmd = [sys.executable, "-m", "beamcrawl.pipelines.template", "--out", str(out), "--runner", "FnApiRunner"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "nothing due now; the next URL falls due at" in proc.stdout, proc.stdout
    assert not (out / "reports").exists()
    with open_store(store_uri) as store:
        assert next_round(store) == 1


def test_a_mistyped_parameter_is_refused_before_anything_is_created(tmp_path, capsys):
    """A launch with --min_dealy must not run a round at the default delay (issue #27)."""
    from beamcrawl.pipelines import template

    out = tmp_path / "crawl"
    assert template.run(["--out", str(out), "--min_dealy=2", "--runner", "FnApiRunner"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "beamcrawl-round: error: unknown option --min_dealy; did you mean --min-delay?"
    ]
    assert not out.exists()


def test_a_parameters_stated_default_is_the_settings_tables(metadata):
    """The template's help texts are its own words, but a default they state is the one the
    settings table (CrawlConfig) gives the option."""
    from beamcrawl.cli.args import default_text, dest_of
    from beamcrawl.core.runtime.config import option_fields

    table = {dest_of(f, opt): f for f, opt in option_fields()}
    stated = 0
    for p in metadata["parameters"]:
        said = re.search(r"\bDefault (\S+?)[ .;,]", p["helpText"] + " ")
        if p["name"] not in table or said is None:
            continue
        default = table[p["name"]].default
        expected = str(default).lower() if isinstance(default, bool) else default_text(default).split()[0]
        assert said.group(1) == expected, p["name"]
        stated += 1
    assert stated >= 30


# Settings whose bound involves another: that one set out of the way, so each is judged alone.
PARTNERS = {
    "max_delay": {"min_delay": 0.0},
    "min_delay": {"max_delay": 1e12},
    "domain_budget_cap": {"domain_budget_base": 0},
    "domain_budget_base": {"domain_budget_cap": 10**12},
    "defer_base": {"defer_max": 1e12},
    "defer_max": {"defer_base": 1.0},
    "min_revisit_interval": {"max_revisit_interval": 1e12},
    "max_revisit_interval": {"min_revisit_interval": 0.001},
}


def _number_texts(whole: bool):
    from hypothesis import strategies as st

    # Up to 999,999: the template caps counts such as fetch_shards at six digits, a sanity
    # bound of the launch form the table does not need.
    digits = st.integers(0, 999_999).map(str)
    if whole:
        return digits
    return digits | st.tuples(digits, st.text("0123456789", min_size=1, max_size=4)).map(".".join)


def _bounded_parameters(metadata) -> list:
    from beamcrawl.cli.args import dest_of
    from beamcrawl.core.runtime.config import option_fields

    params = {p["name"]: p for p in metadata["parameters"]}
    return [
        (f, params[dest_of(f, opt)])
        for f, opt in option_fields()
        if opt.minimum is not None and dest_of(f, opt) in params
    ]


def test_a_parameters_regexes_take_what_the_settings_table_takes(metadata):
    """The launcher checks a value against the template's regexes before the job starts; they
    must refuse what CrawlConfig refuses and take what it takes, for any number written
    as the launcher passes it (digits, maybe a fraction) below a million."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from beamcrawl.core.runtime.config import CrawlConfig

    bounded = _bounded_parameters(metadata)
    assert len(bounded) >= 30

    @given(data=st.data())
    @settings(max_examples=150, deadline=None)
    def check(data):
        f, param = data.draw(st.sampled_from(bounded), label="parameter")
        text = data.draw(
            _number_texts(str(f.type) == "int") | st.sampled_from(["0", "1", "2", "0.001", "16", "17"]), label="value"
        )
        if str(f.type) == "int" and not text.isdigit():
            return
        value = int(text) if str(f.type) == "int" else float(text)
        try:
            CrawlConfig(out="/o", store="sqlite:///o/s", **PARTNERS.get(f.name, {}), **{f.name: value})
            taken = True
        except ValueError:
            taken = False
        assert any(re.fullmatch(rx, text) for rx in param["regexes"]) == taken, (param["name"], text)

    check()


def test_the_user_agents_regex_takes_nothing_the_settings_refuse(metadata):
    """A User-Agent the template's regex takes must start the job: CrawlConfig refuses any but
    printable ASCII (a header goes out as its bytes), so the launcher must refuse them too,
    before a job is created, rather than the job failing on its first line."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from beamcrawl.core.runtime.config import CrawlConfig

    (param,) = [p for p in metadata["parameters"] if p["name"] == "crawler_user_agent"]

    @given(
        text=st.text(min_size=8, max_size=40)
        | st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), min_size=8)
    )
    @settings(max_examples=300, deadline=None)
    def check(text):
        if not any(re.fullmatch(rx, text) for rx in param["regexes"]):
            return
        CrawlConfig(out="/o", store="sqlite:///o/s", user_agent=text)  # raises if refused

    check()
    for refused in ("Mozilla/5.0 (compatible; bot/1.0; café)", "bot/1.0 \t+https://x.example/"):
        assert not any(re.fullmatch(rx, refused) for rx in param["regexes"]), refused
