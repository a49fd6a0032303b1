"""PipelineOptions for a crawl round: the CLI's arguments as a Beam options view."""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions

from beamcrawl.cli.args import add_crawl_arguments, config_from_args
from beamcrawl.core.runtime.config import CrawlConfig


class CrawlOptions(PipelineOptions):
    """The crawl's own options (politeness, identity, limits, store and output)."""

    @classmethod
    def _add_argparse_args(cls, parser):  # type: ignore[no-untyped-def]
        add_crawl_arguments(parser)


def crawl_config(opts: PipelineOptions) -> CrawlConfig:
    """Builds the stages' :class:`CrawlConfig` from parsed options; raises ValueError."""
    return config_from_args(opts.view_as(CrawlOptions))
