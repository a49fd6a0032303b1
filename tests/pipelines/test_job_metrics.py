"""Shuffle figures from Beam's PCollection metrics: bytes into each GroupByKey and side input."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from beamcrawl.pipelines.job_metrics import job_shuffle_figures

N = 2000
VALUE = 200  # bytes of each shuffled value


def _run() -> dict:
    p = beam.Pipeline(runner=FnApiRunner(), options=PipelineOptions(flags=[]))
    side = p | "Side" >> beam.Create([("k", "s" * 5000)])
    _ = (
        p
        | "Numbers" >> beam.Create(list(range(N)))
        | "Key" >> beam.Map(lambda x: (x % 7, "v" * VALUE))
        | "Group" >> beam.GroupByKey()
        | "Use side" >> beam.Map(lambda kv, s: (kv[0], len(list(kv[1])) + len(s)), beam.pvalue.AsDict(side))
    )
    result = p.run()
    result.wait_until_finish()
    return job_shuffle_figures(p, result)


def test_bytes_into_a_group_by_key_and_a_side_input_are_estimated_from_the_runners_metrics():
    figures = _run()
    group = figures["by_step"]["Group"]
    # each element is a small key plus a 200-byte string, and a few bytes of framing
    assert N * VALUE <= group <= N * (VALUE + 40)
    (side,) = [v for k, v in figures["by_step"].items() if k.startswith("Use side [side input")]
    assert 5000 <= side <= 5100
    assert figures["shuffle_bytes"] >= group and figures["side_input_bytes"] == side
    # the grouped values wait for the side input: 7 groups of N/7 values each
    (held,) = [v for k, v in figures["by_step"].items() if k.startswith("Use side [main input")]
    assert N * VALUE <= held <= N * (VALUE + 40) and figures["materialised_bytes"] == held


def test_a_runner_without_monitoring_infos_gives_no_figures():
    class Result:
        pass

    assert job_shuffle_figures(beam.Pipeline(), Result()) == {}
