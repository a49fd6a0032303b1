"""One round launched, run and committed: the Beam job built and run with live progress, its
metrics read, its commit, and the report written (``reports/round-NNNNNN.json``)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import traceback
from typing import Any, Iterable

from apache_beam.options.pipeline_options import PipelineOptions

from beamcrawl.core.archive.compact import compact_round
from beamcrawl.core.runtime import files, prometheus
from beamcrawl.core.runtime.config import CrawlConfig
from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.pipelines import flink_failover, live
from beamcrawl.pipelines.commit import commit_round
from beamcrawl.pipelines.crawl_errors import CrawlError
from beamcrawl.pipelines.crawl_log import CrawlLog
from beamcrawl.pipelines.job_metrics import job_shuffle_figures
from beamcrawl.pipelines.lease import RoundLease
from beamcrawl.pipelines.progress import Progress, round_rate
from beamcrawl.pipelines.round import CrawlRound
from beamcrawl.pipelines.runner_args import option_value
from beamcrawl.pipelines.runner_output import RunnerOutput, worker_exception
from beamcrawl.state.fence import attempt_token, end_attempt, read_progress, revoke_claims, start_attempt
from beamcrawl.stores.base import Store
from beamcrawl.transforms.parquet_io import FLUSH_BYTES, FLUSH_ROWS
from beamcrawl.transforms.warc_io import INDEX_ENTRIES


# The portable runners' metrics answer also lists Beam's own per-PCollection and per-step
# figures as counters (``beam/metric:element_count:v1``...): summed over every step they say
# nothing; the shuffle figures read them per PCollection (pipelines/job_metrics.py).
_SYSTEM = "beam/metric:"


def round_metrics(result: Any) -> dict[str, Any]:
    """Committed Beam counters and distributions as ``{"namespace/name": value}``."""
    out: dict[str, Any] = {}
    try:
        results = result.metrics().query()
    except Exception:  # some runners have no metrics API
        return out
    for counter in results.get("counters", []):
        key = f"{counter.key.metric.namespace}/{counter.key.metric.name}"
        if key.startswith(_SYSTEM):
            continue
        out[key] = out.get(key, 0) + (counter.committed or 0)
    for dist in results.get("distributions", []):
        key = f"{dist.key.metric.namespace}/{dist.key.metric.name}"
        if key.startswith(_SYSTEM):
            continue
        d = dist.committed
        if d is not None and d.count:
            out[key] = {"count": d.count, "sum": d.sum, "min": d.min, "max": d.max, "mean": d.sum / d.count}
    return out


def _root_cause(exc: BaseException) -> str:
    """One line for a failed round: the store's or filesystem's exception where the
    runner's wrapping holds one, else the first line of what the runner raised."""
    from beamcrawl.transforms.dead_letter import is_infrastructure

    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and seen not in chain and len(chain) < 20:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    cause = next((e for e in reversed(chain) if is_infrastructure(e)), chain[-1])
    text = str(cause).strip().splitlines()
    first = text[0] if text else ""
    # Runners append "[while running 'Stage/Step']" and the worker's traceback: keep the head.
    first = first.split(" [while running")[0].strip()
    return f"{type(cause).__name__}: {first}"[:500]


class _QuietInfrastructureFailures(logging.Filter):
    """Drops the runner's log record of an infrastructure failure (a traceback on stderr):
    the round's one-line error says it (see :func:`_root_cause`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from beamcrawl.transforms.dead_letter import is_infrastructure

        exc = record.exc_info[1] if record.exc_info else None
        while exc is not None:
            if is_infrastructure(exc):
                return False
            exc = exc.__cause__ or exc.__context__
        return True


class _QuietWorkerStart(logging.Filter):
    """Drops the warning each worker process logs at start-up that no main session was staged
    (relayed by the local job service): a crawl's code is an installed package, so it stages
    none, and the line, once per worker, says nothing to act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "No semi_persistent_directory found" not in record.getMessage()


# Where the runners log a failed bundle (with its traceback) before they raise.
_RUNNER_LOGGERS = (
    "apache_beam.runners.common",
    "apache_beam.runners.worker.sdk_worker",
    "apache_beam.runners.worker.bundle_processor",
    "apache_beam.runners.portability.fn_api_runner.fn_runner",
)
_QUIET = _QuietInfrastructureFailures()
_WORKER_RELAY = "apache_beam.runners.portability.local_job_service"
_QUIET_START = _QuietWorkerStart()


def refusal_figures(metrics: dict[str, Any]) -> dict[str, Any]:
    """The round report's ``refusals``: ``recorded`` and ``cleared`` (hosts, by kind) this
    round, ``hosts_in_force`` and ``urls_held`` (due URLs left queued by a refusal)."""
    from beamcrawl.core.policy.refusals import KINDS

    return {
        "recorded": {k: metrics.get(f"fetch/refusals_recorded/{k}", 0) for k in KINDS},
        "cleared": {k: metrics.get(f"fetch/refusals_cleared/{k}", 0) for k in KINDS},
        "hosts_in_force": metrics.get("assign_slots/hosts_refused", 0),
        "urls_held": metrics.get("assign_slots/urls_refused", 0),
    }


def run_round(
    cfg: CrawlConfig,
    pipeline_args: list[str],
    store: Store,
    round_no: int,
    lease: RoundLease | None = None,
    sinks: Iterable[live.Sink] = (),
    runner_log: RunnerOutput | None = None,
    crawl_log: CrawlLog | None = None,
) -> dict[str, Any]:
    """Runs and commits one round (only while ``lease`` still holds); returns its report.

    ``sinks`` get the live progress's fields at every poll (pipelines/live.py). On a portable
    runner, ``runner_log`` is where its output goes (pipelines/runner_output.py): a failed
    job's whole error goes there too, and the one line names the worker's exception and it.
    In process, a failed round's traceback goes to ``crawl_log`` (the crawl's log, OUT/logs/),
    which the one line names likewise."""
    outputs = RoundOutputs(cfg.out, round_no)
    outputs.prepare()
    started = time.time()
    progress = Progress(window=cfg.round_window, started=started)
    attempt = attempt_token(round_no, started)
    job = option_value(pipeline_args, "job_name") or flink_failover.job_name(round_no, attempt)
    if flink_failover.rest_address(pipeline_args) is not None and option_value(pipeline_args, "job_name") is None:
        pipeline_args = [*pipeline_args, f"--job_name={job}"]  # how the failover watch finds the job
    options = PipelineOptions(flags=pipeline_args)
    p = live.pipeline(options)  # FnApiRunner answers metrics polls while it runs
    # The attempt's fence: its fetch loops stop within a second once it has ended, however
    # it ended, or once the lease is no longer this run's (state/fence.py).
    _ = p | "Crawl round" >> CrawlRound(cfg, outputs, started, attempt)
    for name in _RUNNER_LOGGERS:
        if _QUIET not in logging.getLogger(name).filters:
            logging.getLogger(name).addFilter(_QUIET)
    if _QUIET_START not in logging.getLogger(_WORKER_RELAY).filters:
        logging.getLogger(_WORKER_RELAY).addFilter(_QUIET_START)
    start_attempt(store, attempt, lease.owner if lease is not None else None)
    try:
        # On a Flink cluster, a failover fences the failed try's fetch loops at once.
        with flink_failover.watching(pipeline_args, job, lambda: revoke_claims(store, cfg.fetch_shards)):
            # live progress on stderr, from the runner's metrics and the fetch loops' progress rows
            result = live.run(
                p,
                round_no,
                cfg.round_window,
                progress=progress,
                sinks=sinks,
                side=lambda: read_progress(store, attempt),
            )
    except Exception as exc:  # one element's failure never gets here (transforms/dead_letter.py)
        cause, where = _root_cause(exc), ""
        kept = runner_log if runner_log is not None else crawl_log
        if kept is not None:  # the whole traceback (a portable runner's: the worker's is in it)
            kept.note(f"round {round_no} failed:", "".join(traceback.format_exception(exc)))
            where = f" (traceback in {kept.path})" if kept.path else ""
        if runner_log is not None:  # the runner's error: the job's text holds the worker's exception
            cause = (worker_exception(str(exc)) or cause)[:500]
        raise CrawlError(
            f"round {round_no} failed and committed nothing (rerun the crawl to retry it): {cause}{where}"
        ) from None
    finally:
        with contextlib.suppress(Exception):  # the store unreachable: the lease's expiry fences it
            end_attempt(store, attempt)
    fetch_done = progress.finished_at or time.time()  # the last progress line's time: the same rate
    metrics = round_metrics(result)
    shuffled = job_shuffle_figures(p, result)
    cluster = flink_failover.rest_address(pipeline_args)
    flink_bytes = flink_failover.flink_task_bytes(cluster, job) if cluster is not None else {}
    # Many small files (a runner that splits bundles, as Dataflow does) merged before the
    # commit marker: a crash in it redoes the round, as any crash before the marker does.
    compacted = compact_round(outputs, cfg.warc_max_bytes, FLUSH_BYTES, max_index=INDEX_ENTRIES, max_rows=FLUSH_ROWS)
    if lease is not None:
        lease.check(f"round {round_no} not committed")  # its files stay staged, its rows queued
    notes: dict[str, Any] = {}
    moved = commit_round(store, outputs, notes)
    finished = time.time()
    frontier_left, frontier_exact = store.report_rows("frontier")
    pages = metrics.get("fetch/success", 0)
    report = {
        "round": round_no,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(finished - started, 3),
        "pipeline_seconds": round(fetch_done - started, 3),
        "round_window": cfg.round_window,
        "hosts_planned": metrics.get("assign_slots/hosts_planned", 0),
        "urls_due": metrics.get("select/due_rows", 0),
        "urls_assigned": metrics.get("assign_slots/urls_assigned", 0),
        "responses": pages,
        "robots_fetches": metrics.get("fetch/robots_fetches", 0),
        "fetch_errors": metrics.get("fetch/error", 0),
        "deferred": metrics.get("fetch/deferred", 0),
        "robots_disallowed": metrics.get("fetch/robots_disallowed", 0),
        # Of those, refused because the check passed its work's bound (core/policy/robots_match.py),
        # in slot assignment or in the fetch loop.
        "robots_capped": metrics.get("assign_slots/robots_checks_capped", 0)
        + metrics.get("fetch/robots_checks_capped", 0),
        # Connections the address policy refused (no socket opened, nothing archived).
        "refused": metrics.get("fetch/refused", 0),
        "bytes": metrics.get("fetch/bytes", 0),
        "links_found": metrics.get("parse/links", 0),
        "new_urls": metrics.get("url_seen/new", 0),
        # Containment (docs/ARCHITECTURE.md §3): links refused by their shape, URLs set aside by budgets.
        "links_refused_by_shape": sum(v for k, v in metrics.items() if k.startswith("url_seen/shape_")),
        "deferred_by_budgets": metrics.get("budgets/urls_deferred", 0),
        # Of those, URLs the operator gave (seeds, submissions): exempt from the host caps,
        # not from the page budget.
        "operator_urls_deferred": metrics.get("budgets/operator_urls_deferred", 0),
        # Content seen: pages checked, new content kept, copies found (their links not
        # followed), and the copies archived as WARC revisit records.
        "content_checked": metrics.get("content_seen/pages_checked", 0),
        "new_content": metrics.get("content_seen/new_originals", 0),
        "exact_copies": metrics.get("content_seen/exact_copies", 0),
        "near_copies": metrics.get("content_seen/near_copies_marked", 0),
        "warc_revisits": metrics.get("store/revisits", 0),
        # Freshness: what revisits found (a 304 transferred no body), and what was dropped.
        "not_modified": metrics.get("store/not_modified", 0),
        "changed": metrics.get("freshness/changed", 0),
        "unchanged": metrics.get("freshness/unchanged", 0),
        "dropped": metrics.get("freshness/dropped", 0),
        "sitemaps_read": metrics.get("parse/sitemaps", 0),
        # Elements set aside (errors/round=N/), by stage and exception; elements quarantined.
        "errors": sum(v for k, v in metrics.items() if k.startswith("errors/")),
        "errors_by_stage": {k[len("errors/") :]: v for k, v in sorted(metrics.items()) if k.startswith("errors/")},
        "quarantined": notes.get("quarantined", []),
        # Hosts that refused the crawler's identity (core/policy/refusals.py): refusals
        # recorded or renewed this round, and cleared, by kind; hosts with due URLs held by
        # one in force this round, and those URLs (left queued).
        "refusals": refusal_figures(metrics),
        "frontier_size": frontier_left,
        # False where counting would be a scan of the table (Bigtable, past 20,000 rows): an
        # estimate from the table's size (stores/bigtable.py, report_rows).
        "frontier_size_exact": frontier_exact,
        "pages_per_second": round_rate(pages, fetch_done - started),
        # Bytes into GroupByKeys and side inputs, and main inputs held for a side input
        # (pipelines/job_metrics.py: on the in-process runner, Flink and Prism; None where the
        # runner reports no PCollection sizes, Dataflow among them): what a round costs a
        # shuffle service, in all and per response.
        "shuffle_bytes": shuffled.get("shuffle_bytes"),
        "shuffle_bytes_per_page": (
            round(shuffled["shuffle_bytes"] / pages) if shuffled.get("shuffle_bytes") is not None and pages else None
        ),
        "side_input_bytes": shuffled.get("side_input_bytes"),
        "materialised_bytes": shuffled.get("materialised_bytes"),
        "shuffle_bytes_by_step": shuffled.get("by_step"),
        # On a Flink session cluster, what Flink counted its tasks exchanging (its REST API's
        # per-vertex bytes; pipelines/job_metrics.py), beside the estimates above; else None.
        "flink_bytes_between_tasks": flink_bytes.get("bytes_between_tasks"),
        "flink_bytes_into_groups": flink_bytes.get("bytes_into_groups"),
        "files": {kind: [p_[len(cfg.out) :].lstrip("/") for p_ in paths] for kind, paths in moved.items()},
        # Staged files of each kind before and after the small ones were merged.
        "compacted": {kind: {"before": c.before, "after": c.after} for kind, c in compacted.items() if c.before},
        "metrics": metrics,
    }
    if cfg.purposes:
        # The crawl's declared purposes and what the sites' usage preferences did to it
        # (core/policy/usage_prefs.py); a crawl without purposes reports as before.
        report.update(
            purposes=list(cfg.purposes),
            usage_refused=metrics.get("fetch/usage_refused", 0),
            usage_header_refused=metrics.get("fetch/usage_header_refused", 0),
            usage_bad_header=metrics.get("fetch/usage_bad_header", 0),
            usage_bad_robots_lines=metrics.get("fetch/usage_bad_robots_lines", 0),
        )
    files.write_bytes(outputs.report_path(), json.dumps(report, indent=2, sort_keys=True, default=str).encode())
    # The latest round for monitoring: one file whatever the round (reports/beamcrawl.prom).
    prometheus.write_latest(report, os.path.dirname(outputs.report_path()))
    return report
