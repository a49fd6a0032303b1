"""CrawlConfig: the limits' defaults are the issue's numbers, and bad values are refused in
one line naming the flag."""

from __future__ import annotations

import pickle

import pytest

from beamcrawl.core.runtime.config import CrawlConfig


def cfg(**kw: object) -> CrawlConfig:
    return CrawlConfig(out="/tmp/o", store="sqlite:///tmp/o/s", **kw)  # type: ignore[arg-type]


def test_defaults_are_the_documented_limits() -> None:
    c = cfg()
    shape = c.shape_rules()
    assert (shape.max_length, shape.max_depth, shape.max_segment_repeats, shape.skip_documents) == (2048, 16, 3, True)
    assert shape.check("http://a.com/x.pdf") == "binary_extension"
    assert cfg(fetch_documents=True).shape_rules().check("http://a.com/x.pdf") is None
    assert c.max_body_bytes == 2 * 1024 * 1024 and c.max_decoded_bytes == 4 * 1024 * 1024
    rules = c.budget_rules()
    assert rules.budget(0) == 100 and rules.budget(5) == 150 and rules.budget(0, seeded=True) == 1100
    assert (rules.new_pages_per_host, rules.new_hosts_per_round, rules.max_hosts) == (1000, 20, 1000)
    assert rules.defer(0.0, 0) == 86400.0 and rules.defer(0.0, 10) == 30 * 86400.0
    off = cfg(domain_budgets=False).budget_rules()
    assert off.budget(0) > 10**15 and off.new_hosts_per_round == 20
    pickle.loads(pickle.dumps(c))  # handed to every stage


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"min_transfer_rate": -1.0}, "--min-transfer-rate must be >= 0"),
        ({"stall_timeout": float("nan")}, "--stall-timeout must be >= 0"),
        ({"max_decoded_bytes": 0}, "--max-decoded-bytes must be >= 1"),
        ({"max_segment_repeats": 1}, "--max-segment-repeats must be 0 (off) or >= 2"),
        ({"max_url_depth": -2}, "--max-url-depth must be >= 0"),
        ({"domain_budget_base": 10, "domain_budget_cap": 5}, "--domain-budget-cap (5)"),
        ({"budget_period": 0.0}, "--budget-period must be >= 1"),  # the one bound: the CLI always had 1
        ({"defer_base": 10.0, "defer_max": 5.0}, "--defer-base (10.0) <= --defer-max (5.0)"),
        ({"max_hosts_per_domain": -1}, "--max-hosts-per-domain must be >= 0"),
        # a header goes out as its bytes: "é" was sent as UTF-8 and recorded as latin-1
        ({"user_agent": "beamcrawl-\u00e9/1 (+http://x)"}, "--user-agent must be printable ASCII"),
        ({"user_agent": "beamcrawl/1\r\nX: y"}, "--user-agent must be printable ASCII"),
        ({"user_agent": ""}, "--user-agent must be printable ASCII"),
    ],
)
def test_bad_limits_are_refused_in_one_line(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError) as info:
        cfg(**kwargs)
    assert needle in str(info.value) and "\n" not in str(info.value)
