"""Every argument a crawl is given is one of its own options or one of Beam's; anything else is
named, with the closest valid spelling (issue #27: a typo in a politeness or block option
must not crawl with the default instead)."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.cli.main import crawl_parser
from beamcrawl.pipelines.options import beam_option_flags, unknown_argument

PARSER = crawl_parser()
OURS = [s for a in PARSER._actions if a.help != argparse.SUPPRESS for s in a.option_strings if s.startswith("--")]
ACCEPTED = {s for a in PARSER._actions for s in a.option_strings}


def leftover(*argv: str) -> list[str]:
    return PARSER.parse_known_args(["--out", "/tmp/never", *argv])[1]


@pytest.mark.parametrize(
    "argv, meant",
    [
        (["--block-list", "block.txt"], "--blocklist"),
        (["--min-dealy", "0.5"], "--min-delay"),
        (["--roundwindow", "5"], "--round-window"),
        (["--exit_when_idle"], "--exit-when-idle"),
        (["--job-name=x"], "--job_name"),  # Beam's spelling is the underscore one
        (["--runer", "FnApiRunner"], "--runner"),
    ],
)
def test_the_issues_typos_are_named_with_the_spelling_meant(argv, meant):
    name = argv[0].split("=")[0]
    assert unknown_argument(leftover(*argv), PARSER) == f"unknown option {name}; did you mean {meant}?"


def test_beam_options_and_the_crawls_underscore_spellings_pass():
    argv = [
        "--runner",
        "FnApiRunner",
        "--job_name=j",
        "--direct_num_workers=2",
        "--flink_master=[local]",
        "--experiments",
        "a",
        "--experiments=b",
        "--user_agent=beam/1",
        "--min_delay=0.5",
        "--round_window",
        "5",
    ]
    assert unknown_argument(leftover(*argv), PARSER) is None


def test_known_beam_options_come_from_beams_own_options_classes():
    flags = set(beam_option_flags())
    assert {"--runner", "--job_name", "--direct_num_workers", "--flink_master", "--project", "--temp_location"} <= flags
    assert "--blocklist" not in flags and "--min-delay" not in flags


def test_a_beam_option_without_its_value_is_one_line():
    assert unknown_argument(leftover("--direct_num_workers"), PARSER) == (
        "argument --direct_num_workers: expected one argument"
    )


def _typo(flag: str) -> st.SearchStrategy[str]:
    """One edit of a flag's name: a letter dropped, doubled or swapped with the next, or a
    dash and an underscore exchanged."""
    name = flag[2:]
    i = st.integers(0, len(name) - 1)
    dropped = i.map(lambda k: name[:k] + name[k + 1 :])
    doubled = i.map(lambda k: name[:k] + name[k] + name[k:])
    swapped = st.integers(0, max(0, len(name) - 2)).map(
        lambda k: name[:k] + name[k + 1 : k + 2] + name[k] + name[k + 2 :]
    )
    dashes = st.just(name.replace("-", "_") if "-" in name else name.replace("_", "-"))
    return (dropped | doubled | swapped | dashes).map(lambda n: "--" + n)


@given(data=st.data())
@settings(max_examples=80, deadline=None)
def test_a_mistyped_crawl_option_is_refused_naming_it_and_a_valid_spelling(data):
    flag = data.draw(st.sampled_from([f for f in OURS if f not in ("--help",)]), label="flag")
    typo = data.draw(_typo(flag), label="typo")
    beam = set(beam_option_flags())
    if typo in ACCEPTED or typo in beam or any(f.startswith(typo) for f in ACCEPTED if f.startswith("--")):
        return  # the edit made another valid spelling (or an abbreviation argparse accepts)
    message = unknown_argument(leftover(f"{typo}=1"), PARSER)
    assert message is not None and message.startswith(f"unknown option {typo}; did you mean ")
    suggested = message.rsplit(" ", 1)[1].rstrip("?")
    assert suggested in ACCEPTED or suggested in beam
    if typo.replace("_", "-") == flag:
        assert suggested == flag  # --exit_when_idle: the crawl's own dashed spelling
