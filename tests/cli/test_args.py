"""The crawl's options are built from the settings table: the command line takes CrawlConfig's
defaults, and a value out of bounds is refused in one place, with the same one-line message
whether it came from the command line or from code."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.cli.args import config_from_args
from beamcrawl.cli.main import crawl_parser
from beamcrawl.core.runtime.config import CrawlConfig, flag_of, option_fields

BOUNDED = [(f, opt) for f, opt in option_fields() if opt.minimum is not None]


def parse(out: str, *argv: str) -> CrawlConfig:
    args, rest = crawl_parser().parse_known_args(["--out", out, *argv])
    assert rest == []
    return config_from_args(args)


def test_the_command_line_defaults_are_the_configs(tmp_path):
    out = str(tmp_path / "o")
    assert parse(out) == CrawlConfig(out=out, store=f"sqlite:///{out}/store.sqlite")


def test_the_parser_converts_and_leaves_bounds_to_the_config(tmp_path):
    """Validated once: the parser reads ``--fetch-shards=0`` as 0; CrawlConfig refuses it."""
    args, _ = crawl_parser().parse_known_args(["--out", str(tmp_path), "--fetch-shards=0", "--revisit-policy=x"])
    assert (args.fetch_shards, args.revisit_policy) == (0, "x")
    with pytest.raises(ValueError, match=r"^--fetch-shards must be >= 1, got 0; --revisit-policy must be adaptive"):
        config_from_args(args)


def _out_of_bounds(f, opt) -> st.SearchStrategy:
    whole = str(f.type) == "int"
    low = (
        st.integers(max_value=int(opt.minimum) - 1)
        if whole
        else st.floats(max_value=opt.minimum, exclude_max=True, allow_nan=False, allow_infinity=False)
    )
    if opt.maximum is None:
        return low
    return low | (
        st.integers(min_value=int(opt.maximum) + 1)
        if whole
        else st.floats(min_value=opt.maximum, exclude_min=True, allow_nan=False, allow_infinity=False)
    )


@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_a_value_out_of_bounds_gets_the_same_one_line_refusal_from_the_command_line_and_code(data):
    f, opt = data.draw(st.sampled_from(BOUNDED), label="setting")
    value = data.draw(_out_of_bounds(f, opt), label="value")
    flag = flag_of(f, opt)
    with pytest.raises(ValueError) as from_cli:
        parse("/tmp/beamcrawl-never-created", f"{flag}={value!r}")
    with pytest.raises(ValueError) as from_code:
        CrawlConfig(
            out="/tmp/beamcrawl-never-created",
            store="sqlite:///tmp/beamcrawl-never-created/store.sqlite",
            **{f.name: value},
        )
    message = str(from_cli.value)
    assert message == str(from_code.value) and "\n" not in message
    assert message.startswith(f"{flag} must be ")


@pytest.mark.parametrize("text", ["inf", "-inf", "nan"])
def test_a_number_that_is_not_finite_is_refused_naming_the_flag(tmp_path, text):
    with pytest.raises(
        ValueError, match=r"^--min-delay must be (finite|>= 0), got " + ("-?inf" if "inf" in text else "nan")
    ):
        parse(str(tmp_path / "o"), f"--min-delay={text}", "--max-delay=inf" if text == "inf" else "--max-delay=120")
    assert not math.isfinite(float(text))


def test_every_option_reads_its_default_from_the_table():
    parser = crawl_parser()
    for f, opt in option_fields():
        (action,) = [a for a in parser._actions if flag_of(f, opt) in a.option_strings]
        if isinstance(f.default, (int, float, str)):
            assert action.default == f.default, f.name


def test_the_most_links_a_page_gives_is_an_option(tmp_path):
    out = str(tmp_path / "o")
    assert parse(out).max_links_per_page == 10_000
    assert parse(out, "--max-links-per-page", "50").max_links_per_page == 50
    assert parse(out, "--max-links-per-page=0").max_links_per_page == 0  # no cap
    with pytest.raises(ValueError, match="--max-links-per-page must be >= 0"):
        parse(out, "--max-links-per-page=-1")
