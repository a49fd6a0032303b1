"""What a finished round's job moved: bytes that crossed a shuffle, from Beam's PCollection metrics.

A runner that reports monitoring infos (the in-process FnApiRunner, in one process or
several; Flink and Prism through their job service) counts every PCollection's elements and
samples their encoded sizes; nothing is added to the workers' work to get them. A PCollection that feeds a ``GroupByKey`` crosses a shuffle (on Dataflow, bytes written to and
read from the shuffle service, paid per GB); one read as a side input is materialised whole
for every reader. The main input of a step that waits for a side input is materialised too
when the side input is computed from the same data (content seen's settling waits for the
near decisions about the very checksums it settles): a runner cannot fuse the two, so
every element is written out and read back, as through a shuffle. Their estimated bytes,
the sampled mean size times the element count, are what the round report calls
``shuffle_bytes``, ``side_input_bytes`` and ``materialised_bytes`` (the last counts every
main input of a step with side inputs: an upper bound).

The figure is an upper bound where a combiner is lifted (the runner shuffles partial sums,
while the metric counts the combiner's input), and an estimate where sampling is sparse.

Which runner reports what (:func:`job_monitoring_infos`):

- the in-process FnApiRunner: its result's ``monitoring_infos()``;
- the portable runners, Flink through its job server (the local mini-cluster and a session
  cluster alike) and Prism: the job service's ``GetJobMetrics`` answer, which carries the
  SDK workers' monitoring infos (the element counts and sampled sizes among them) merged
  over every task, under the pipeline's own PCollection ids. Beam's ``PortableMetrics``
  keeps only the user metrics of that answer, so it is asked for again here, through the
  result's job service (private attributes of Beam's ``PipelineResult``, as the live
  progress poll uses them). On Flink these are the same estimates as in process (the
  session cluster's test compares them step by step). Prism merges the counts of a
  PCollection that two stages report before it answers, so its ``materialised_bytes``
  counts such a main input twice; its shuffle and side-input bytes are as in process. Flink's
  own count of the bytes its tasks exchanged is on its REST API, per job vertex
  (``read-bytes``, ``write-bytes``): for a round sent to a session cluster, the report adds
  it (``pipelines/flink_failover.py`` :func:`~beamcrawl.pipelines.flink_failover.flink_task_bytes`,
  beside the failover watch that reads the same API). The local mini-cluster's REST API ends with the job, so a
  ``[local]`` round has only the estimates;
- Dataflow (not runnable here, so not read): its job metrics carry, besides the user's,
  system metrics ``ElementCount`` and ``MeanByteCount`` per PCollection, named by the
  producing step's output (``output_user_name`` like ``Group-out0``; Beam's
  ``DataflowMetrics.all_metrics()`` returns them). Their product is the same estimate, but
  mapping those names to the pipeline's PCollections cannot be checked without a Dataflow
  job, so the report's fields are None there;
- any other runner: None.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from apache_beam.metrics import monitoring_infos as mi
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

__all__ = ["job_monitoring_infos", "job_shuffle_figures", "pcollection_bytes", "shuffle_figures"]

GBK_URN = common_urns.primitives.GROUP_BY_KEY.urn
PARDO_URN = common_urns.primitives.PAR_DO.urn
FLATTEN_URN = common_urns.primitives.FLATTEN.urn

log = logging.getLogger(__name__)


def pcollection_bytes(infos: Iterable[Any]) -> dict[str, float]:
    """Estimated encoded bytes per PCollection id: mean sampled size × element count.

    A runner gives one count per stage (merged over its workers and tasks); a PCollection
    that one stage writes and another reads over the data channel is counted by both (Flink
    reports such a pair, ``GroupByKey`` output read by an unfused step), so its count is the
    largest one, not their sum. The sampled sizes of every report make its mean.
    """
    counts: dict[str, int] = {}
    sizes: dict[str, tuple[int, int]] = {}
    for info in infos:
        pcoll = info.labels.get(mi.PCOLLECTION_LABEL)
        if not pcoll:
            continue
        if info.urn == mi.ELEMENT_COUNT_URN:
            counts[pcoll] = max(counts.get(pcoll, 0), int(mi.extract_counter_value(info)))
        elif info.urn == mi.SAMPLED_BYTE_SIZE_URN:
            n, total, _lo, _hi = mi.extract_distribution(info)
            had = sizes.get(pcoll, (0, 0))
            sizes[pcoll] = (had[0] + n, had[1] + total)
    out: dict[str, float] = {}
    for pcoll, (n, total) in sizes.items():
        if n:
            out[pcoll] = total / n * counts.get(pcoll, n)
    return out


def shuffle_figures(pipeline: beam_runner_api_pb2.Pipeline, infos: Iterable[Any]) -> dict[str, Any]:
    """Bytes into every GroupByKey and every side input of a finished job.

    Args:
        pipeline: The job's pipeline proto (``Pipeline.to_runner_api()``; its PCollection ids
            are the ones the runner's metrics name).
        infos: The runner's monitoring infos (``result.monitoring_infos()``).

    Returns:
        ``shuffle_bytes``, ``side_input_bytes`` and ``materialised_bytes`` (totals,
        rounded) and ``by_step``: the bytes into each GroupByKey, side input and main input
        waiting for a side input, by the consuming transform's name.
    """
    sizes = _through_flattens(pipeline, _folded_copies(pipeline, pcollection_bytes(infos)))
    by_step: dict[str, int] = {}
    shuffle = side = held = 0.0
    for transform in pipeline.components.transforms.values():
        urn = transform.spec.urn
        if urn == GBK_URN:
            b = sum(sizes.get(p, 0.0) for p in transform.inputs.values())
            shuffle += b
            by_step[transform.unique_name] = round(b)
        elif urn == PARDO_URN and transform.spec.payload:
            payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
            for local in payload.side_inputs:
                b = sizes.get(transform.inputs[local], 0.0)
                side += b
                by_step[f"{transform.unique_name} [side input {local}]"] = round(b)
            mains = [pcoll for local, pcoll in transform.inputs.items() if local not in payload.side_inputs]
            if payload.side_inputs and mains:
                b = sum(sizes.get(p, 0.0) for p in mains)
                held += b
                by_step[f"{transform.unique_name} [main input, waits on its side inputs]"] = round(b)
    return {
        "shuffle_bytes": round(shuffle),
        "side_input_bytes": round(side),
        "materialised_bytes": round(held),
        "by_step": by_step,
    }


def _folded_copies(pipeline: beam_runner_api_pb2.Pipeline, sizes: dict[str, float]) -> dict[str, float]:
    """``sizes`` with the runner's copies of a PCollection (``<id>:<n>``) added to it.

    Flink's job server (Beam's Java fuser) gives a PCollection that two fused stages produce
    one copy per stage, named ``<id>:0``, ``<id>:1``...: the pipeline knows only ``<id>``,
    whose bytes are the copies' sum (a flatten of two tagged inputs, slot assignment's join).
    A stage that reads the whole PCollection counts it under ``<id>`` too: the larger stands.
    """
    known = pipeline.components.pcollections
    out: dict[str, float] = {}
    copies: dict[str, float] = {}
    for pcoll, b in sizes.items():
        base, sep, n = pcoll.rpartition(":")
        if pcoll not in known and sep and n.isdigit() and base in known:
            copies[base] = copies.get(base, 0.0) + b
        else:
            out[pcoll] = b
    for base, b in copies.items():
        out[base] = max(out.get(base, 0.0), b)
    return out


def _through_flattens(pipeline: beam_runner_api_pb2.Pipeline, sizes: dict[str, float]) -> dict[str, float]:
    """``sizes`` with the output of every Flatten that no SDK worker measured sized as the
    sum of its inputs.

    A portable runner may flatten in the runner itself (Flink does), so no worker counts the
    output's elements: the ``CoGroupByKey`` of slot assignment groups such an output, and
    content seen's copies reach their readers as one. Its bytes are its inputs' bytes.
    """
    flattens = {
        out: list(t.inputs.values())
        for t in pipeline.components.transforms.values()
        if t.spec.urn == FLATTEN_URN and not t.subtransforms
        for out in t.outputs.values()
    }
    out = dict(sizes)

    def size(pcoll: str, depth: int = 0) -> float:
        if pcoll in out or pcoll not in flattens or depth > 50:
            return out.get(pcoll, 0.0)
        total = sum(size(p, depth + 1) for p in flattens[pcoll])
        out[pcoll] = total
        return total

    for pcoll in flattens:
        size(pcoll)
    return out


def job_monitoring_infos(result: Any) -> list[Any] | None:
    """The monitoring infos of a finished job, or None when its runner gives none.

    The in-process runner's result has them; a portable runner's (Flink, Prism) job service
    answers ``GetJobMetrics`` with them (committed, else attempted: Flink fills both, Prism
    only committed). Raises whatever the runner's plumbing raises (the caller decides).
    """
    infos = getattr(result, "monitoring_infos", None)
    if infos is not None:
        return list(infos())
    service, job_id = getattr(result, "_job_service", None), getattr(result, "_job_id", None)
    if service is None or job_id is None:
        return None
    from apache_beam.portability.api import beam_job_api_pb2

    answer = service.GetJobMetrics(beam_job_api_pb2.GetJobMetricsRequest(job_id=job_id))
    return list(answer.metrics.committed) or list(answer.metrics.attempted) or None


def job_shuffle_figures(pipeline: Any, result: Any) -> dict[str, Any]:
    """:func:`shuffle_figures` of a finished job, or ``{}`` when its runner reports no
    monitoring infos (a figure for the report, never a reason to fail a round).

    The job's proto is the one its runner kept (``pipeline_proto``: the in-process runner
    of ``live.py``), else the pipeline translated again.
    """
    try:
        infos = job_monitoring_infos(result)
        if infos is None:
            return {}
        proto = getattr(pipeline.runner, "pipeline_proto", None) or pipeline.to_runner_api()
        return shuffle_figures(proto, infos)
    except Exception as exc:  # noqa: BLE001 - runner-specific metric plumbing; the round stands
        log.debug("no shuffle figures from this runner: %s", exc)
        return {}
