"""What a finished round's job moved: bytes that crossed a shuffle, from Beam's PCollection metrics.

A runner that reports monitoring infos (the in-process FnApiRunner, in one process or
several) counts every PCollection's elements and samples their encoded sizes. A
PCollection that feeds a ``GroupByKey`` crosses a shuffle (on Dataflow, bytes written to and
read from the shuffle service, paid per GB); one read as a side input is materialised whole
for every reader. The main input of a step that waits for a side input is materialised too
when the side input is computed from the same data (the round's "Mark copies" waits for
content seen's decisions about the very pages it marks): a runner cannot fuse the two, so
every element is written out and read back, as through a shuffle. Their estimated bytes,
the sampled mean size times the element count, are what the round report calls
``shuffle_bytes``, ``side_input_bytes`` and ``materialised_bytes`` (the last counts every
main input of a step with side inputs: an upper bound).

The figure is an upper bound where a combiner is lifted (the runner shuffles partial sums,
while the metric counts the combiner's input), and an estimate where sampling is sparse.
Runners that report no monitoring infos (Prism, Flink through the job server) give None.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from apache_beam.metrics import monitoring_infos as mi
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

__all__ = ["job_shuffle_figures", "pcollection_bytes", "shuffle_figures"]

GBK_URN = common_urns.primitives.GROUP_BY_KEY.urn
PARDO_URN = common_urns.primitives.PAR_DO.urn

log = logging.getLogger(__name__)


def pcollection_bytes(infos: Iterable[Any]) -> dict[str, float]:
    """Estimated encoded bytes per PCollection id: mean sampled size × element count."""
    counts: dict[str, int] = {}
    sizes: dict[str, tuple[int, int]] = {}
    for info in infos:
        pcoll = info.labels.get(mi.PCOLLECTION_LABEL)
        if not pcoll:
            continue
        if info.urn == mi.ELEMENT_COUNT_URN:
            counts[pcoll] = counts.get(pcoll, 0) + int(mi.extract_counter_value(info))
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
    sizes = pcollection_bytes(infos)
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


def job_shuffle_figures(pipeline: Any, result: Any) -> dict[str, Any]:
    """:func:`shuffle_figures` of a finished job, or ``{}`` when its runner reports no
    monitoring infos (a figure for the report, never a reason to fail a round)."""
    infos = getattr(result, "monitoring_infos", None)
    if infos is None:
        return {}
    try:
        return shuffle_figures(pipeline.to_runner_api(), infos())
    except Exception as exc:  # noqa: BLE001 - runner-specific metric plumbing; the round stands
        log.debug("no shuffle figures from this runner: %s", exc)
        return {}
