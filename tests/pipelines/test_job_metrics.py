"""Shuffle figures from Beam's PCollection metrics: bytes into each GroupByKey and side input."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from beamcrawl.pipelines.job_metrics import job_monitoring_infos, job_shuffle_figures, shuffle_figures

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


def _joined(p: beam.Pipeline) -> None:
    """Two keyed inputs joined (a Flatten of tagged inputs into one GroupByKey: portable
    runners flatten in the runner) and a side input that is itself a Flatten."""
    a = p | "A" >> beam.Create([(i % 50, "a" * 100) for i in range(2000)])
    b = p | "B" >> beam.Create([(i % 50, "b" * 100) for i in range(2000)])
    s1 = p | "S1" >> beam.Create([(str(i), "s" * 50) for i in range(100)])
    s2 = p | "S2" >> beam.Create([(str(i + 100), "s" * 50) for i in range(100)])
    side = (s1, s2) | "Both" >> beam.Flatten()
    _ = (
        {"a": a, "b": b}
        | "Join" >> beam.CoGroupByKey()
        | "Use" >> beam.Map(lambda kv, d: (kv[0], len(d)), beam.pvalue.AsDict(side))
    )


def test_prism_reports_the_join_and_the_side_input_as_the_in_process_runner_does():
    """Prism's job service answers with the workers' PCollection metrics (as Flink's does:
    the Flink rounds' reports are checked in test_end_to_end.py and test_flink_cluster.py)."""
    from beamcrawl.pipelines.runners import prepare

    figures = {}
    for name, flags in (("fnapi", ["--runner=FnApiRunner"]), ("prism", prepare(["--runner=PrismRunner"]))):
        p = beam.Pipeline(options=PipelineOptions(flags=flags))
        _joined(p)
        result = p.run()
        result.wait_until_finish()
        figures[name] = job_shuffle_figures(p, result)
    local, prism = figures["fnapi"], figures["prism"]
    join = "Join/CoGroupByKeyImpl/GroupByKey"
    # 4,000 tagged values of ~116 bytes each, whichever runner ran them (the join's input is
    # a Flatten that Prism runs itself: its bytes are those of the Flatten's inputs)
    assert 4000 * 100 <= prism["by_step"][join] == local["by_step"][join] <= 4000 * 130
    (side,) = [k for k in local["by_step"] if k.startswith("Use [side input")]
    assert 200 * 50 <= prism["by_step"][side] <= 200 * 80
    assert abs(prism["by_step"][side] - local["by_step"][side]) <= 0.05 * local["by_step"][side]


def test_the_in_process_runner_gives_the_proto_it_ran_and_the_pipeline_is_not_translated_again(monkeypatch):
    """``live.LiveFnApiRunner`` keeps the job it ran: the figures come from it (the same as from
    a second translation, which took ~0.6 s a round) and the pipeline is translated once."""
    from beamcrawl.pipelines.live import LiveFnApiRunner

    p = beam.Pipeline(runner=LiveFnApiRunner(), options=PipelineOptions(flags=[]))
    _joined(p)
    result = p.run()
    result.wait_until_finish()
    again = p.to_runner_api()
    translations = []
    real = beam.Pipeline.to_runner_api
    monkeypatch.setattr(
        beam.Pipeline, "to_runner_api", lambda self, *a, **k: translations.append(1) or real(self, *a, **k)
    )
    figures = job_shuffle_figures(p, result)
    assert translations == []
    assert p.runner.pipeline_proto is not None
    assert figures == shuffle_figures(again, job_monitoring_infos(result))
    join = "Join/CoGroupByKeyImpl/GroupByKey"
    assert 4000 * 100 <= figures["by_step"][join] <= 4000 * 130
