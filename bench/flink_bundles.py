"""How many bundles Flink's batch runner makes of a stage after a GroupByKey, with and without
the portable runner's bundle options.

    PYTHONPATH=. .venv/bin/python bench/flink_bundles.py [--elements 20000] [--parallelism 2]

The round's writers (WARC + CDXJ, Parquet parts) open a file per bundle and rotate it by size,
so a runner that cuts a stage into many small bundles would make many small files. This runs
``--elements`` elements through a GroupByKey and a DoFn that counts its ``start_bundle`` calls
on Flink's local mini-cluster (the job server ``make flink`` builds), once as the crawl runs
it and once with ``--max_bundle_size=10 --max_bundle_time_millis=50``, and prints the bundles
each made. One bundle per task means the options do not apply to batch.

Not collected by pytest; run it by hand and keep the printed lines with the commit.
"""

from __future__ import annotations

import argparse
import tempfile

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

from beamcrawl.pipelines import flink, runners


class _CountBundles(beam.DoFn):
    def __init__(self) -> None:
        self.bundles = Metrics.counter("bench", "bundles")

    def start_bundle(self) -> None:
        self.bundles.inc()

    def process(self, element: int):
        yield element


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=20_000)
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args()
    flags = runners.prepare(["--runner=FlinkRunner", "--flink_master=[local]", f"--parallelism={args.parallelism}"])
    with tempfile.TemporaryDirectory(prefix="flink-bundles-") as out, flink.job_server(flags, out) as served:
        for extra in ([], ["--max_bundle_size=10", "--max_bundle_time_millis=50"]):
            p = beam.Pipeline(options=PipelineOptions(flags=[*served, *extra]))
            _ = (
                p
                | beam.Create(list(range(args.elements)))
                | beam.Map(lambda x: (x % 100, x))
                | beam.GroupByKey()
                | beam.FlatMap(lambda kv: kv[1])
                | beam.ParDo(_CountBundles())
            )
            result = p.run()
            result.wait_until_finish()
            counted = [c.committed for c in result.metrics().query()["counters"] if c.key.metric.name == "bundles"]
            print(
                f"{args.elements} elements, {args.parallelism} tasks, options {' '.join(extra) or '(none)'}: "
                f"{sum(counted)} bundles"
            )


if __name__ == "__main__":
    main()
