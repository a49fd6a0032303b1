"""A round report as Prometheus text, checked with prometheus_client's own parser."""

from __future__ import annotations

import os

import pytest
from prometheus_client.parser import text_string_to_metric_families

from beamcrawl.core.runtime.prometheus import render, write_latest

REPORT = {
    "round": 7,
    "started_at": "2026-01-01T00:00:00Z",
    "seconds": 12.5,
    "pipeline_seconds": 10.25,
    "responses": 120,
    "fetch_errors": 3,
    "frontier_size": 900,
    "pages_per_second": 11.7,
    "files": {"warc": ["warc/round=7/a.warc.gz"], "cdxj": ["warc/round=7/a.cdxj"], "pages": ["p1", "p2"]},
    "metrics": {
        "fetch/success": 120,
        "fetch/status/2xx": 100,
        "fetch/status/4xx": 15,
        "fetch/status/5xx": 5,
        "fetch/latency_ms": {"count": 120, "sum": 2400, "min": 2, "max": 95, "mean": 20.0},
        "fetch/politeness_wait_ms": {"count": 118, "sum": 59000, "min": 0, "max": 1200, "mean": 500.0},
        "store/latency_us": {"count": 0, "sum": 0, "min": 0, "max": 0, "mean": 0},
        "BatchElements/batch_size": {"count": 1, "sum": 15, "min": 15, "max": 15, "mean": 15},
        'odd ns/we"ird\nname': 1,
    },
}


def _samples(text):
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    return families, samples


def test_parses_with_prometheus_client():
    families, samples = _samples(render(REPORT))
    assert samples[("beamcrawl_round", ())] == 7
    assert samples[("beamcrawl_round_seconds", ())] == 12.5
    assert samples[("beamcrawl_round_responses", ())] == 120
    assert samples[("beamcrawl_round_started_timestamp_seconds", ())] == 1_767_225_600
    assert samples[("beamcrawl_round_files", (("kind", "pages"),))] == 2
    assert samples[("beamcrawl_fetch_success", ())] == 120
    assert families["beamcrawl_fetch_status"].type == "gauge"
    assert samples[("beamcrawl_fetch_status", (("status", "4xx"),))] == 15
    assert families["beamcrawl_fetch_politeness_wait_ms"].type == "summary"
    assert samples[("beamcrawl_fetch_politeness_wait_ms_count", ())] == 118
    assert samples[("beamcrawl_fetch_politeness_wait_ms_sum", ())] == 59000
    assert samples[("beamcrawl_fetch_politeness_wait_ms_max", ())] == 1200
    assert samples[("beamcrawl_BatchElements_batch_size_count", ())] == 1


def test_every_line_is_help_type_or_a_sample_without_timestamp():
    text = render(REPORT)
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("#"):
            assert line.split(" ")[1] in ("HELP", "TYPE")
            continue
        name_and_labels, value = line.rsplit(" ", 1)
        float(value)  # exactly one value, no timestamp (the textfile collector rejects them)
        assert " " not in name_and_labels or "{" in name_and_labels


def test_odd_names_are_sanitised_and_labels_escaped():
    report = {"round": 1, "metrics": {"a-b/c d": 2, 'x/k/v"\\\n': 3}}
    families, samples = _samples(render(report))
    assert samples[("beamcrawl_a_b_c_d", ())] == 2
    assert samples[("beamcrawl_x_k", (("k", 'v"\\\n'),))] == 3


def test_same_report_same_text_and_nothing_for_non_numbers():
    assert render(REPORT) == render(dict(reversed(list(REPORT.items()))))
    text = render({"round": 2, "started_at": "not a time", "flag": True, "note": "x", "metrics": {"s/x": "y"}})
    _, samples = _samples(text)
    assert set(samples) == {("beamcrawl_round", ())}


def test_write_latest_keeps_one_file_holding_the_latest_round(tmp_path):
    reports = tmp_path / "reports"
    (reports / "round-000007.json").parent.mkdir()
    (reports / "round-000007.json").write_text("{}")
    first = write_latest(REPORT, str(reports))
    assert first == str(reports / "beamcrawl.prom")
    later = {**REPORT, "round": 8, "responses": 5}
    assert write_latest(later, str(reports)) == first
    assert open(first).read() == render(later)
    # One .prom in the folder (a textfile collector sees no clash), no temporary left over.
    assert sorted(os.listdir(reports)) == ["beamcrawl.prom", "round-000007.json"]
    _, samples = _samples(open(first).read())
    assert samples[("beamcrawl_round", ())] == 8


@pytest.mark.parametrize("value,text", [(float("nan"), "NaN"), (float("inf"), "+Inf"), (0.5, "0.5"), (3, "3")])
def test_numbers(value, text):
    assert f"\nbeamcrawl_m_v {text}\n" in render({"round": 1, "metrics": {"m/v": value}})
