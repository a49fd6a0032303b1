"""One crawl round as one Beam job (docs/ARCHITECTURE.md §1).

select due URLs → apply domain budgets (over-budget URLs deferred, not deleted) → host
state → resolve hosts (addresses for per-IP politeness) → assign slots per host
(CoGroupByKey on host) → fetch politely by shard (one owner per host and per IP) → drop the
URLs the window left unfetched (their frontier rows stay) → parse, while the fetch goes on →
set bodies aside (each response record spooled where it was fetched; compact pages go on)
→ content seen (copies and near copies; the pages wait in batch files and come out as one
``PageBatch`` per file) → decide each page's next visit (change rate, status code) → store
pages once (WARC; a 304 as a revisit record) and publish events and edges (Parquet) → URL
seen (DRUM, links of a bad shape refused) → record host and URL state, domain usage and
linking domains. From content seen on, pages travel as batches of about a thousand: every
stage after it is one DoFn call per batch, not per page. Every stage sets an element that
fails aside as a dead letter (errors/, transforms/dead_letter.py) and goes on; in a batch,
a page that fails is its own dead letter and the batch's other pages go on. The round's files are committed by the crawl loop (pipelines/crawl.py) after
the job finishes. :class:`CrawlRound` is the round as one composite transform.

EXAMPLES (one round through the crawl loop; see README for all runners)::

    beamcrawl crawl --seeds seeds.txt --out out/ --rounds 1 --runner FnApiRunner
    beamcrawl crawl --seeds seeds.txt --out gs://b/out --store bigtable://p/i \\
        --runner DataflowRunner --project p --region us-central1 --temp_location gs://b/tmp
"""

from __future__ import annotations

import apache_beam as beam

from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.core.runtime.outputs import HOLDS, RoundOutputs
from beamcrawl.transforms.assign_slots import AssignSlots
from beamcrawl.transforms.budgets import (
    ApplyBudgets,
    CountDomainUsage,
    CountLinkingDomains,
)
from beamcrawl.transforms.content_seen import NEW_BATCHES, PAGE_BATCHES, FindDuplicateContent
from beamcrawl.transforms.dead_letter import DeadLetters
from beamcrawl.transforms.fetch import FetchPages, needs_processing
from beamcrawl.transforms.freshness import ScheduleRevisits
from beamcrawl.transforms.parquet_io import WriteDeadLetters, WriteLinkEdges, WritePageEvents
from beamcrawl.transforms.parse import ParsePages
from beamcrawl.transforms.record import RecordHostState, RecordUrlState
from beamcrawl.transforms.resolve import ResolveHosts
from beamcrawl.transforms.select import ReadDueFrontier, ReadHostState
from beamcrawl.transforms.set_aside import SetBodiesAside
from beamcrawl.transforms.url_seen import CANDIDATE_BLOCKS, ExtractCandidates, QueueUnseenUrls
from beamcrawl.transforms.warc_io import WriteWarc


class CrawlRound(beam.PTransform[beam.pvalue.PBegin, dict[str, beam.PCollection]]):
    """One crawl round, from the due frontier to the store and the round's staged files.

    Applied to a pipeline's root (``p | CrawlRound(cfg, outputs, now)``), it is one step in
    a runner's graph with the stages nested inside it. Every stage's dead letters go to the
    round's :class:`~beamcrawl.transforms.dead_letter.DeadLetters` handler, written once as
    ``errors/``; a stage applied outside it fails the pipeline's construction.

    Governed by: every setting of :class:`~beamcrawl.core.runtime.config.CrawlConfig`.

    Returns:
        The round's outputs by name: ``pages`` (scheduled pages, one ``PageBatch`` per
        batch file of content seen), ``fetched`` (fetch results), ``hosts`` (updated host
        records), ``new_urls`` (per bucket, the URLs queued for the first time) and
        ``errors`` (what writing the dead letters gives).
    """

    def __init__(self, cfg: CrawlConfig, outputs: RoundOutputs, now: float, attempt: str | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.outputs = outputs
        self.now = now
        self.attempt = attempt  # the token the crawl loop fences this attempt by (state/fence.py)

    def expand(self, pbegin: beam.pvalue.PBegin) -> dict[str, beam.PCollection]:
        cfg, outputs, now = self.cfg, self.outputs, self.now
        now_ms = int(now * 1000)
        rules = cfg.budget_rules()
        budgets_on = cfg.domain_budgets or cfg.max_new_hosts_per_domain > 0 or cfg.max_hosts_per_domain > 0
        # Every stage inside registers its dead letters; leaving the block writes them once.
        with DeadLetters(pbegin, WriteDeadLetters(outputs), "Gather dead letters") as letters:
            due = (
                pbegin
                | "Read due frontier" >> ReadDueFrontier(cfg.store, now_ms)
                | "Apply domain budgets" >> ApplyBudgets(cfg.store, rules, now, outputs, enabled=budgets_on)
            )
            host_state = due | "Read host state" >> ReadHostState(cfg.store)
            resolved = host_state.records | "Resolve hosts" >> ResolveHosts(cfg, now)
            plans = {
                "due": due,
                "hosts": resolved,
                "policies": host_state.policies,
            } | "Assign slots" >> AssignSlots(cfg, now)

            fetched = plans | "Fetch" >> FetchPages(cfg, self.attempt)
            pages = (
                fetched.results
                | "Drop deferred results" >> beam.Filter(needs_processing)
                | "Parse" >> ParsePages(cfg.robots_token, cfg.max_sitemap_bytes, cfg.max_links_per_page)
                | "Set bodies aside" >> SetBodiesAside(outputs)
                | "Content seen"
                >> FindDuplicateContent(
                    cfg.store,
                    outputs.round_no,
                    bits=cfg.seen_bucket_bits,
                    staging=outputs.staged(PAGE_BATCHES),
                    new_staging=outputs.staged(NEW_BATCHES),
                )
                | "Schedule revisits" >> ScheduleRevisits(cfg.schedule_policy(), cfg.revisit_policy)
            )

            events = pages | "Store pages once" >> WriteWarc(outputs, cfg.warc_max_bytes, cfg.user_agent)
            _ = events | "Publish page events" >> WritePageEvents(outputs)
            _ = pages | "Publish link edges" >> WriteLinkEdges(outputs)

            new_urls = (
                pages
                | "Discovered URLs" >> ExtractCandidates(cfg.shape_rules(), cfg.max_redirects)
                | "URL seen"
                >> QueueUnseenUrls(
                    cfg.store,
                    cfg.seen_bucket_bits,
                    now_ms,
                    lastmod_hints=cfg.revisit_policy == "adaptive",
                    staging=outputs.staged(CANDIDATE_BLOCKS),
                    holds_staging=outputs.staged(HOLDS),
                )
            )

            _ = fetched.hosts | "Record host state" >> RecordHostState(cfg.store)
            _ = pages | "Record URL state" >> RecordUrlState(cfg.store, outputs)
            if cfg.domain_budgets:
                _ = fetched.results | "Record domain usage" >> CountDomainUsage(
                    cfg.store, outputs.round_no, now, rules.period
                )
                _ = pages | "Record linking domains" >> CountLinkingDomains(cfg.store)
        return {
            "pages": pages,
            "fetched": fetched.results,
            "hosts": fetched.hosts,
            "new_urls": new_urls,
            "errors": letters.output(),
        }
