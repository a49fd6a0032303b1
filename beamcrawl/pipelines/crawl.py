"""The crawl loop: seeds in, then rounds, each one Beam job followed by its commit.

A round holds the crawl's lease (a conditional write in the store's ``meta`` table), so two
rounds never run at once on one crawl. After the job finishes, the round's staged files are
moved into place, the frontier rows it finished are deleted, the round counter advances,
and a report is written. A round that fails commits nothing; rerunning the crawl redoes it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from typing import Any, TextIO

from beamcrawl.core.runtime import files, heap
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.pipelines import idle, out_folder
from beamcrawl.pipelines.commit import commit_round, next_round
from beamcrawl.pipelines.crawl_errors import CrawlError, RoundInterrupted
from beamcrawl.pipelines.crawl_log import CrawlLog
from beamcrawl.pipelines.interrupt import watch_interrupt
from beamcrawl.pipelines.launch import run_round
from beamcrawl.pipelines.lease import RoundLease, lease_ttl
from beamcrawl.pipelines.live_status import LiveStatus
from beamcrawl.pipelines.round_charts import RoundCharts
from beamcrawl.pipelines.round_summary import summary
from beamcrawl.pipelines.runner_output import RunnerOutput, kept_off_console
from beamcrawl.pipelines.seeding import submit_urls
from beamcrawl.stores.base import Store, StoreError, open_store

log = logging.getLogger(__name__)


def _remove_if_empty(folder: str) -> None:
    """Removes a local folder this run created, if nothing was written into it."""
    with contextlib.suppress(OSError):
        os.rmdir(folder)


def _require_gcs_credentials(out: str) -> None:
    """Fails at once, in one line, where Cloud Storage would retry unauthenticated for minutes."""
    from beamcrawl.core.runtime.gcp import NoCredentials, require_credentials

    try:
        require_credentials(f"output folder {out}", "or give a local --out folder")
    except NoCredentials as exc:
        raise CrawlError(str(exc)) from None


def default_contact_warning(cfg: CrawlConfig) -> str | None:
    """The warning for a crawl that would reach real sites naming beamcrawl's own contact URL
    (the default User-Agent) instead of its operator's; None with ``--resolve`` (a test web)."""
    from beamcrawl import CONTACT_URL, PRODUCT_TOKEN, __version__

    if cfg.resolve or CONTACT_URL not in cfg.user_agent:
        return None
    return (
        f"warning: the User-Agent names beamcrawl's project page (+{CONTACT_URL}) as the contact for "
        "this crawl; site owners should reach you: give --user-agent 'Mozilla/5.0 (compatible; "
        f"{PRODUCT_TOKEN}/{__version__}; +https://your.site/crawler)' (README: Crawling real sites, safely)"
    )


def crawl(
    cfg: CrawlConfig,
    rounds: int,
    seeds: list[str],
    pipeline_args: list[str],
    out: TextIO = sys.stdout,
    *,
    exit_when_idle: bool = False,
) -> list[dict[str, Any]]:
    """Seeds the frontier and runs ``rounds`` rounds; returns their reports.

    Before each round, when nothing can be fetched, it says when the next URL falls due and
    waits for it (``pipelines/idle.py``), or stops with ``exit_when_idle``: a wait is not
    a round.
    """
    created = not files.is_remote(cfg.out) and not os.path.exists(cfg.out)
    if cfg.out.startswith("gs://"):
        _require_gcs_credentials(cfg.out)
    folder = out_folder.check_folder(cfg.out, cfg.store, bool(seeds))  # before anything is created
    try:
        files.ensure_writable(cfg.out)
    except OSError as exc:
        raise CrawlError(f"output folder {cfg.out} is not writable: {exc.strerror or exc}") from None
    try:
        store = open_store(cfg.store)
    except StoreError as exc:
        if created:
            _remove_if_empty(cfg.out)  # a crawl that never started leaves nothing behind
        raise CrawlError(str(exc)) from None
    with store:
        try:
            claim = out_folder.claim(store, cfg.out, cfg.store, folder, bool(seeds), cfg.purposes)
        except CrawlError:
            if created:
                _remove_if_empty(cfg.out)
            raise
        status = LiveStatus(cfg.out, claim.crawl_id, out_folder.store_name(cfg.store))
        # On a portable runner, its workers' and its own output go to the log, not the console.
        with (
            CrawlLog(cfg.out) as record,
            kept_off_console(pipeline_args, record) as runner_log,
            RoundCharts(cfg.out) as charts,  # OUT/reports/*.png, drawn beside the next round
        ):
            try:
                reports = _rounds(
                    cfg, store, rounds, seeds, pipeline_args, record.tee(out), exit_when_idle, status, record,
                    charts, runner_log,
                )  # fmt: skip
            except BaseException as exc:
                with contextlib.suppress(OSError):
                    status.stopped(
                        "was interrupted"
                        if isinstance(exc, (KeyboardInterrupt, RoundInterrupted))
                        else f"failed: {exc}"
                    )
                raise
            charts.close()  # the last round's charts drawn before the status says finished
            status.stopped("finished")
            return reports


def _rounds(
    cfg: CrawlConfig,
    store: Store,
    rounds: int,
    seeds: list[str],
    pipeline_args: list[str],
    out: TextIO,
    exit_when_idle: bool,
    status: LiveStatus,
    record: CrawlLog,
    charts: RoundCharts,
    runner_log: RunnerOutput | None = None,
) -> list[dict[str, Any]]:
    """The rounds of one run, under the crawl's lease; ``status`` (OUT/status.json) and
    ``record`` (OUT/logs/) follow them, ``charts`` are redrawn after each, ``runner_log``
    holds a portable runner's output."""
    reports = []
    with RoundLease(store, ttl=lease_ttl(cfg.round_window)) as lease:
        status.between_rounds()
        if seeds:
            seeded = submit_urls(store, seeds, int(time.time() * 1000))
            print(f"seeds: {seeded.accepted} queued, {seeded.duplicates} already known", file=out)
        contact = default_contact_warning(cfg)
        if contact and rounds:
            print(contact, file=sys.stderr, flush=True)  # once per run, before any request goes out
        for _ in range(rounds):
            round_no = next_round(store)
            unfinished = RoundOutputs(cfg.out, round_no)
            if unfinished.committing():
                # The last run died while committing this round: finish it, don't redo it.
                lease.check(f"round {round_no} not committed")
                commit_round(store, unfinished)
                print(f"round {round_no}: finished the commit a killed run had started", file=out, flush=True)
                continue
            written = unfinished.written()
            if written:  # never overwrite a round another crawl (or store) wrote here
                raise CrawlError(
                    f"round {round_no} is already in {cfg.out} ({written}) though the store has not run it: "
                    "the folder holds another crawl's output; give another --out"
                )
            if not idle.wait_until_due(
                store, cfg, out, exit_when_idle=exit_when_idle, label=f"round {round_no}: ", meanwhile=charts.catch_up
            ):
                break
            print(f"round {round_no}: running (window {cfg.round_window:g}s) ...", file=out, flush=True)
            status.round_started(round_no)
            with watch_interrupt() as interrupt:
                try:
                    report = run_round(
                        cfg, pipeline_args, store, round_no, lease, sinks=(record.progress, status.progress),
                        runner_log=runner_log, crawl_log=record,
                    )  # fmt: skip
                except BaseException:
                    if interrupt.hit:  # Beam re-raises a KeyboardInterrupt as its own error
                        raise RoundInterrupted(round_no, unfinished.committing()) from None
                    raise
            status.between_rounds(round_no)
            print(summary(report), file=out, flush=True)
            reports.append(report)
            heap.release()  # what the round freed goes back before the drawing and the wait (core/runtime/heap.py)
            charts.round_done()  # OUT/reports/*.png, in a child process; a failure is logged, never raised
    return reports
