"""One crawl round as a scheduled job: the Dataflow Flex Template's entry point.

The launcher passes the template's parameters (templates/crawl_round/metadata.json) and
Dataflow's own options (runner, project, region, temp_location, sdk_container_image, …) as
flags. The round is idempotent and resumable: a launch that finds the previous round still
running exits cleanly (the round lease), so does one that finds nothing due (saying when
the next URL is; no empty job is launched), and a round rerun after a failure redoes only what
was not committed.

EXAMPLES::

    # what the launcher runs, in effect
    python -m beamcrawl.pipelines.template --out gs://b/crawl --store bigtable://p/i \\
        --seeds gs://b/seeds.txt --runner DataflowRunner --project p --region us-central1 \\
        --temp_location gs://b/tmp
    # the same round locally (embedded store, in-process runner)
    python -m beamcrawl.pipelines.template --out /tmp/crawl --runner FnApiRunner
"""

from __future__ import annotations

import logging
import sys
from typing import Sequence

from beamcrawl.cli.args import (
    OneLineArgumentParser,
    add_crawl_arguments,
    config_from_args,
)

log = logging.getLogger("beamcrawl.template")


def round_parser() -> OneLineArgumentParser:
    """The round's parameters: ``--seeds``, then the crawl's options (the settings table)."""
    parser = OneLineArgumentParser(prog="beamcrawl-round", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", help="Optional file of seed URLs (gs:// or local) queued before the round.")
    add_crawl_arguments(parser)
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """Runs one round; returns the process exit status (0 also when another round runs)."""
    parser = round_parser()
    args, beam_args = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    from beamcrawl.pipelines.options import unknown_argument

    unknown = unknown_argument(beam_args, parser)  # a mistyped parameter must not run with its default
    if unknown is not None:
        print(f"beamcrawl-round: error: {unknown}", file=sys.stderr)
        return 2

    from beamcrawl.pipelines.crawl import crawl
    from beamcrawl.pipelines.crawl_errors import CrawlError
    from beamcrawl.pipelines.lease import LeaseHeld
    from beamcrawl.pipelines.runners import (
        RunnerSetupError,
        check_runner,
        check_store_for_runner,
        prepare,
    )
    from beamcrawl.pipelines.seeding import read_seeds

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)
    try:
        cfg = config_from_args(args)
        check_runner(beam_args)
        check_store_for_runner(cfg.store, beam_args)
        runner_args = prepare(beam_args)
        seeds = (
            read_seeds(args.seeds, cfg.shape_rules(), allow_private=cfg.allow_private_networks, resolve=cfg.resolve)
            if args.seeds
            else []
        )
    except (ValueError, CrawlError, RunnerSetupError) as exc:
        for line in str(exc).splitlines():  # a seeds file: one line per bad seed line
            print(f"beamcrawl-round: error: {line}", file=sys.stderr)
        return 2
    try:
        # A scheduled launch with nothing due says when there will be and ends (no job).
        crawl(cfg, 1, seeds, runner_args, exit_when_idle=True)
    except LeaseHeld as exc:
        log.info("not starting: %s", exc)  # the previous round still runs: nothing to do
        return 0
    except CrawlError as exc:
        print(f"beamcrawl-round: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run())
