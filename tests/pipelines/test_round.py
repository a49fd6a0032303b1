"""pipelines/round.py: one crawl round as one composite transform, applied in a TestPipeline."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import apache_beam as beam
import pytest
from aiohttp import web
from apache_beam.metrics import Metrics
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.pipelines.round import CrawlRound
from beamcrawl.pipelines.seeding import submit_urls
from beamcrawl.schemas.records import PageBatch
from beamcrawl.stores.base import open_store
from beamcrawl.transforms.content_seen import NEW_BATCHES, PAGE_BATCHES
from loopback import LoopbackServer, serving  # tests/loopback.py

pytestmark = pytest.mark.e2e  # a whole round

_BATCHES = Metrics.counter("test_round", "round_page_batches")


def _count_batch(batch: PageBatch) -> None:
    assert type(batch) is PageBatch and batch.pages
    _BATCHES.inc()


class _Site(LoopbackServer):
    """``/`` links to ``/a``, ``/many`` to ``/m0`` ... ``/m4``; no robots.txt."""

    async def handle(self, request: web.Request) -> web.Response:
        if request.path == "/":
            return web.Response(body=b"<html><body><a href='/a'>a</a></body></html>", content_type="text/html")
        if request.path == "/many":  # five links, for a crawl that takes two a page
            links = "".join(f"<a href='/m{i}'>{i}</a>" for i in range(5))
            return web.Response(body=f"<html><body>{links}</body></html>".encode(), content_type="text/html")
        return web.Response(status=404)


@pytest.fixture(scope="module")
def site() -> Iterator[_Site]:
    with serving(_Site()) as s:
        yield s


def test_a_round_applied_in_a_test_pipeline_is_one_step(site: _Site, tmp_path: Path) -> None:
    root = f"http://127.0.0.1:{site.port}/"
    uri = f"sqlite:///{tmp_path}/store.sqlite"
    now = time.time()
    with open_store(uri) as store:
        submit_urls(store, [root], int(now * 1000) - 1)
    cfg = CrawlConfig(
        out=str(tmp_path / "out"), store=uri, allow_private_networks=True, min_delay=0.05, round_window=3.0
    )
    outputs = RoundOutputs(cfg.out, 1)
    outputs.prepare()

    p = TestPipeline(runner="FnApiRunner")
    round_ = p | "Crawl round" >> CrawlRound(cfg, outputs, now)
    pages = round_["pages"] | "Page URLs" >> beam.FlatMap(
        lambda batch: [(pg.fetch.url, pg.fetch.status) for pg in batch.pages]
    )
    _ = round_["pages"] | "Count batches" >> beam.Map(_count_batch)
    new = round_["new_urls"] | "New URLs" >> beam.FlatMap(lambda entries: [e.url for e in entries])
    assert_that(pages, equal_to([(root + "robots.txt", 404), (root, 200)]), label="pages")
    assert_that(new, equal_to([root + "a"]), label="new")
    # The round nests in the graph: one step at the top, the stages inside it.
    (top,) = [part for part in p.transforms_stack[0].parts if part.full_label == "Crawl round"]
    assert not {"Fetch", "URL seen", "Gather dead letters"} & {part.full_label for part in p.transforms_stack[0].parts}
    inner = {part.full_label for part in top.parts}
    assert {"Crawl round/Fetch", "Crawl round/URL seen", "Crawl round/Gather dead letters"} <= inner
    result = p.run()
    result.wait_until_finish()
    assert list(Path(outputs.staged("pages")).glob("*.parquet"))
    # The pages crossed to "Mark copies" in batch files of the round's staging (the assert on
    # `pages` above: each came out once), not whole in the runner.
    batches = list(Path(outputs.staged(PAGE_BATCHES)).glob("*.batch"))
    counters = result.metrics().query(MetricsFilter().with_namespace("content_seen"))["counters"]
    by_name = {c.key.metric.name: c.committed for c in counters}
    assert by_name["page_batches"] == len(batches) >= 1
    assert by_name["page_batch_bytes"] == sum(b.stat().st_size for b in batches)
    # So did the new checksums, to the near copies' decision (a span file a spill, a span a part).
    new_batches = list(Path(outputs.staged(NEW_BATCHES)).glob("*.spans"))
    assert by_name["new_content_batches"] == len(new_batches) >= 1
    # After content seen an element is a batch file's pages, not a page.
    (arrived,) = result.metrics().query(MetricsFilter().with_name("round_page_batches"))["counters"]
    assert arrived.committed == len(batches)


def test_the_links_a_page_gives_are_capped_by_the_crawls_setting(site: _Site, tmp_path: Path) -> None:
    """--max-links-per-page reaches the parse: the page's first two links are queued, the page
    event says ``links``, and the round counts the page (parse/truncated_links)."""
    import pyarrow.parquet as pq

    from beamcrawl.cli.args import config_from_args
    from beamcrawl.cli.main import crawl_parser

    page = f"http://127.0.0.1:{site.port}/many"
    uri = f"sqlite:///{tmp_path}/store.sqlite"
    now = time.time()
    with open_store(uri) as store:
        submit_urls(store, [page], int(now * 1000) - 1)
    argv = ["--out", str(tmp_path / "out"), "--store", uri, "--allow-private-networks", "--min-delay", "0.05"]
    args, rest = crawl_parser().parse_known_args([*argv, "--round-window", "3", "--max-links-per-page", "2"])
    assert rest == []
    cfg = config_from_args(args)
    outputs = RoundOutputs(cfg.out, 1)
    outputs.prepare()

    p = TestPipeline(runner="FnApiRunner")
    round_ = p | "Crawl round" >> CrawlRound(cfg, outputs, now)
    new = round_["new_urls"] | "New URLs" >> beam.FlatMap(lambda entries: [e.url for e in entries])
    root = page[: -len("many")]
    assert_that(new, equal_to([root + "m0", root + "m1"]), label="new")
    result = p.run()
    result.wait_until_finish()
    rows = pq.read_table(outputs.staged("pages"), columns=["url", "parse_truncated", "out_links"]).to_pylist()
    assert {"url": page, "parse_truncated": "links", "out_links": 2} in rows
    counters = result.metrics().query(MetricsFilter().with_name("truncated_links"))["counters"]
    assert sum(c.committed for c in counters) == 1
