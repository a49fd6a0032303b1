"""CPU and elements of the stages after content seen, on simweb's pages, without a fetch.

Builds parsed pages straight from simweb's model (``stage_costs.sample_results``, no server),
then runs, on the in-process FnApiRunner, content seen with its staging (the pages wait in
batch files) followed by the round's stages after it, wired as ``pipelines/round.py`` wires
them: Schedule revisits, Store pages once, Publish page events and link edges, Discovered
URLs and URL seen, Record URL state, Record linking domains. A second pipeline runs content
seen alone; the difference of their CPU times is what the stages after it cost. Each is run
``--repeat`` times, on fresh stores, and the best is kept (the machine is shared). Prints CPU
µs per page, and the elements every PCollection of the job held (the runner's own element
counts) per page: how many times a page, or what stands for it, passed through a step.

    python bench/after_content_seen.py [--pages 5000] [--hosts 300] [--repeat 3]

The pages are read from a file inside the job (in the graph, they were pickled and compressed
with it). The pipelines do not name the element type between the stages, so the same script runs on a
tree where the stages take a page per call and on one where they take a batch.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
import time
from typing import Any

import apache_beam as beam
from apache_beam.metrics import monitoring_infos as mi
from apache_beam.options.pipeline_options import PipelineOptions

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from stage_costs import sample_results  # noqa: E402

from beamcrawl.core.policy.change_rate import SchedulePolicy  # noqa: E402
from beamcrawl.core.runtime import gctune  # noqa: E402
from beamcrawl.core.runtime.outputs import RoundOutputs  # noqa: E402
from beamcrawl.transforms.budgets import CountLinkingDomains  # noqa: E402
from beamcrawl.transforms.content_seen import PAGE_BATCHES, FindDuplicateContent  # noqa: E402
from beamcrawl.transforms.dead_letter import collected  # noqa: E402
from beamcrawl.transforms.freshness import ScheduleRevisits  # noqa: E402
from beamcrawl.transforms.parquet_io import WriteLinkEdges, WritePageEvents  # noqa: E402
from beamcrawl.transforms.parse import parse_fetch  # noqa: E402
from beamcrawl.transforms.record import RecordUrlState  # noqa: E402
from beamcrawl.transforms.url_seen import ExtractCandidates, QueueUnseenUrls  # noqa: E402
from beamcrawl.transforms.warc_io import WriteWarc  # noqa: E402

NOW_MS = 1_767_225_600_000


def _load(path: str) -> list[Any]:
    with open(path, "rb") as fh:
        return pickle.load(fh)


def _run(pages: str, work: str, after: bool) -> tuple[float, float, int]:
    """One job: content seen (and, with ``after``, the stages after it). Returns its CPU
    seconds, wall seconds and the elements all its PCollections held."""
    os.makedirs(work)
    store = f"sqlite:///{work}/store.sqlite"
    outputs = RoundOutputs(os.path.join(work, "out"), 1)
    outputs.prepare()
    cpu0, t0 = time.process_time(), time.time()
    p = beam.Pipeline(options=PipelineOptions(flags=[], runner="FnApiRunner"))
    marked = (
        p
        | "Pages file" >> beam.Create([pages])
        | "Pages" >> beam.FlatMap(_load)
        | "Content seen" >> FindDuplicateContent(store, 1, staging=outputs.staged(PAGE_BATCHES))
    )
    if after:
        scheduled = marked | "Schedule revisits" >> ScheduleRevisits(SchedulePolicy())
        events = scheduled | "Store pages once" >> WriteWarc(outputs, 1 << 30, "beamcrawl-bench/1")
        _ = events | "Publish page events" >> WritePageEvents(outputs)
        _ = scheduled | "Publish link edges" >> WriteLinkEdges(outputs)
        _ = scheduled | "Discovered URLs" >> ExtractCandidates() | "URL seen" >> QueueUnseenUrls(store, 0, NOW_MS)
        _ = scheduled | "Record URL state" >> RecordUrlState(store, outputs)
        _ = scheduled | "Record linking domains" >> CountLinkingDomains(store)
    _ = collected(p)
    result = p.run()
    result.wait_until_finish()
    cpu, wall = time.process_time() - cpu0, time.time() - t0
    elements = sum(
        int(mi.extract_counter_value(info))
        for info in result.monitoring_infos()
        if info.urn == mi.ELEMENT_COUNT_URN and info.labels.get(mi.PCOLLECTION_LABEL)
    )
    return cpu, wall, elements


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=5000)
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    gctune.tune()  # as the round's workers do
    pages = [parse_fetch(r, "beamcrawl") for r in sample_results(args.hosts, args.pages)]
    n = len(pages)
    root = tempfile.mkdtemp(prefix="beamcrawl-after-cs-")
    # The pages are read from a file in the job: carried in the graph, they were pickled and
    # bz2-compressed with it (seconds of CPU that blurred the difference of the two jobs).
    path = os.path.join(root, "pages.pickle")
    with open(path, "wb") as fh:
        pickle.dump(pages, fh, pickle.HIGHEST_PROTOCOL)
    best: dict[bool, tuple[float, float, int]] = {}
    for i in range(args.repeat):
        for after in (False, True):
            got = _run(path, os.path.join(root, f"{int(after)}-{i}"), after)
            if after not in best or got[0] < best[after][0]:
                best[after] = got
    (cs_cpu, cs_wall, cs_el), (all_cpu, all_wall, all_el) = best[False], best[True]
    print(f"{n:,} pages, {sum(len(pg.links) for pg in pages) / n:.1f} links a page; best of {args.repeat}")
    print("| job | CPU s | wall s | CPU µs a page | elements | elements a page |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, cpu, wall, el in (
        ("content seen alone", cs_cpu, cs_wall, cs_el),
        ("content seen and the stages after it", all_cpu, all_wall, all_el),
        ("the stages after content seen (difference)", all_cpu - cs_cpu, all_wall - cs_wall, all_el - cs_el),
    ):
        print(f"| {name} | {cpu:.2f} | {wall:.2f} | {cpu / n * 1e6:,.0f} | {el:,} | {el / n:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
