"""Operator URL files (core/urls/seedfile.py): comments, line numbers, and each URL's checks.

A ``#`` ends the URL only at the start of a line or after whitespace, so a fragment stays part
of its URL; every bad line is reported with its file and line number and the reason, capped
at a number of lines with a closing count.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.net.netpolicy import ResolveRules
from beamcrawl.core.urls.seedfile import (
    MAX_REPORTED,
    BadLine,
    address_refusal,
    check_url,
    report_lines,
    strip_comment,
    url_lines,
)
from beamcrawl.core.urls.urlshape import ShapeRules


@pytest.mark.parametrize(
    "line, text",
    [
        ("http://ok.example/", "http://ok.example/"),
        ("  http://ok.example/  \n", "http://ok.example/"),
        ("http://ok.example/ # why it is here", "http://ok.example/"),
        ("http://ok.example/\t# a tab before the comment", "http://ok.example/"),
        ("http://a.example/#top", "http://a.example/#top"),  # a fragment is not a comment
        ("http://a.example/#top # and a comment", "http://a.example/#top"),
        ("# a whole-line comment http://x.example/", ""),
        ("   # indented comment", ""),
        ("", ""),
        ("   \t ", ""),
    ],
)
def test_comments_end_a_line_only_at_its_start_or_after_whitespace(line: str, text: str) -> None:
    assert strip_comment(line) == text


def test_url_lines_number_lines_from_one_and_skip_blanks_and_comments() -> None:
    lines = ["# seeds\n", "\n", "http://a.example/\n", "  # note\n", "http://b.example/ # b\n"]
    assert list(url_lines(lines)) == [(3, "http://a.example/"), (5, "http://b.example/")]


_url_chars = st.text(st.sampled_from("abcxyz0123456789/-._~%?=&#:"), max_size=30)


@settings(max_examples=200, deadline=None)
@given(_url_chars, st.text(max_size=30), st.sampled_from([" ", "\t", "  "]))
def test_any_comment_after_whitespace_is_dropped_and_the_url_kept(path: str, comment: str, gap: str) -> None:
    """Generated URLs (with ``#`` inside) followed by a comment: the URL comes back whole."""
    url = "http://h.example/" + path
    assert strip_comment(url + gap + "#" + comment) == url
    assert strip_comment(url) == url


def test_check_url_normalises_a_good_url() -> None:
    assert check_url("HTTP://Ok.Example:80/a/./b", ShapeRules(), allow_private=False) == (
        "http://ok.example/a/b",
        None,
        False,
    )


def test_check_url_says_why_a_url_is_malformed_or_refused_by_shape() -> None:
    norm, reason, refused = check_url("ftp://files.example/", ShapeRules(), allow_private=False)
    assert norm is None and reason and not refused
    deep = "http://ok.example/" + "/".join(f"d{i}" for i in range(40))
    norm, reason, refused = check_url(deep, ShapeRules(), allow_private=False)
    assert norm is None and reason.startswith("refused by the URL-shape rules") and not refused
    assert check_url(deep, None, allow_private=False)[0] is not None  # no shape rules: kept


def test_an_ip_literal_host_is_judged_by_the_address_policy() -> None:
    norm, reason, refused = check_url("http://169.254.169.254/latest/meta-data/", ShapeRules(), allow_private=True)
    assert norm is None and refused and "link-local" in reason
    assert "--allow-private-networks" not in reason  # no flag allows the metadata endpoint
    norm, reason, refused = check_url("http://10.1.2.3/", ShapeRules(), allow_private=False)
    assert norm is None and refused and "--allow-private-networks" in reason
    assert check_url("http://10.1.2.3/", ShapeRules(), allow_private=True) == ("http://10.1.2.3/", None, False)


def test_a_name_mapped_by_resolve_rules_is_judged_by_its_mapped_address() -> None:
    rules = ResolveRules([("*.lan.test", "10.0.0.5")])
    assert address_refusal("http://box.lan.test/", allow_private=False, rules=rules) is not None
    assert address_refusal("http://box.lan.test/", allow_private=True, rules=rules) is None
    assert address_refusal("http://unmapped.example/", allow_private=False, rules=rules) is None  # left to DNS


def test_bad_lines_name_file_line_and_reason_and_are_capped() -> None:
    bad = [BadLine("seeds.txt", n, f"x{n}", "no scheme") for n in range(1, MAX_REPORTED + 6)]
    shown = report_lines(bad)
    assert len(shown) == MAX_REPORTED + 1
    assert shown[0] == "seeds.txt:1: bad seed 'x1': no scheme"
    assert shown[-1] == "... and 5 more bad line(s)"
    assert report_lines(bad[:3]) == [str(b) for b in bad[:3]]
    refused = BadLine("s.txt", 2, "http://10.0.0.1/", "private address", refused=True)
    assert str(refused) == "s.txt:2: refused: 'http://10.0.0.1/': private address"
