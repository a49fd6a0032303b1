"""The crawl loop: seeds in, then rounds, each one Beam job followed by its commit.

A round holds the crawl's lease (a conditional write in the store's ``meta`` table), so two
rounds never run at once on one crawl. After the job finishes, the round's staged files are
moved into place, the frontier rows it finished are deleted, the round counter advances,
and a report is written. A round that fails commits nothing; rerunning the crawl redoes it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, TextIO
from urllib.parse import urlsplit

from apache_beam.options.pipeline_options import PipelineOptions

from beamcrawl.analysis.charts import charts_after_round
from beamcrawl.core import files, prometheus, quarantine
from beamcrawl.core.config import CrawlConfig
from beamcrawl.core.faults import crash_point
from beamcrawl.core.outputs import RoundOutputs
from beamcrawl.core.urlnorm import InvalidURL, fingerprint, host_of, normalize
from beamcrawl.core.urlshape import ShapeRules
from beamcrawl.pipelines import idle
from beamcrawl.pipelines import live
from beamcrawl.pipelines import round as round_pipeline
from beamcrawl.pipelines.job_metrics import job_shuffle_figures
from beamcrawl.schemas.records import PRIORITY_SEED, Candidate, FrontierEntry, UrlState, fp_key, key_fp
from beamcrawl.stores.base import Mutation, Store, StoreError, open_store
from beamcrawl.transforms.budgets import credit_seed_domains
from beamcrawl.transforms.freshness import scheduled_key
from beamcrawl.transforms.record import read_requeue_line
from beamcrawl.transforms.url_seen import queue_new_urls

log = logging.getLogger(__name__)

LEASE_KEY = b"lease"
ROUND_KEY = b"round"
LEASE_TTL = 6 * 3600.0


class CrawlError(Exception):
    """A crawl cannot start or continue; the message is one line naming the problem."""


class LeaseHeld(CrawlError):
    """Another round of this crawl is running (a scheduled launch should just stop)."""


class RoundInterrupted(CrawlError):
    """The operator interrupted a round (Ctrl-C); ``round_no`` was not committed, or only
    partly (``committing``), and a rerun redoes or finishes it."""

    def __init__(self, round_no: int, committing: bool = False) -> None:
        if committing:
            message = f"interrupted while committing round {round_no}; rerun to finish the commit"
        else:
            message = f"interrupted; round {round_no} was not committed, rerun to redo it"
        super().__init__(message)
        self.round_no = round_no
        self.committing = committing


class LeaseLost(CrawlError):
    """The crawl's lease was taken over or could not be renewed while a round ran: that
    round must not commit (another run may be working on the same frontier)."""


@dataclass
class SeedReport:
    accepted: int = 0
    duplicates: int = 0
    rejected: list[dict[str, str]] = field(default_factory=list)


class SeedsError(CrawlError):
    """Bad lines in a seeds file: ``lines`` holds one message per bad line (capped)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def read_seeds(
    path: str,
    shape: ShapeRules | None = None,
    *,
    allow_private: bool = False,
    resolve: Iterable[tuple[str, str]] = (),
) -> list[str]:
    """Seed URLs from a file: one per line; blank lines and ``#`` comments (at the start of a
    line or after whitespace) skipped (core/seedfile.py).

    Args:
        path: The file (local or any Beam filesystem).
        shape: The crawl's URL-shape rules (default: the default rules). A seed failing one
            would never be crawled, so it is refused like a malformed one.
        allow_private: ``--allow-private-networks``: else a seed on a loopback or private
            IP address is refused (a link-local one always is).
        resolve: The ``--resolve`` rules; a seed host they map is judged by that address.

    Raises:
        SeedsError: Naming the file and line of every bad seed (up to a cap), or saying the
            file holds no URL.
        CrawlError: The file cannot be read.
    """
    from beamcrawl.core.netpolicy import ResolveRules
    from beamcrawl.core.seedfile import BadLine, check_url, report_lines, url_lines

    rules = shape or ShapeRules()
    try:
        with files.open_read(path) as fh:
            lines = fh.read().decode("utf-8").splitlines()
    except FileNotFoundError:
        raise CrawlError(f"seeds file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CrawlError(f"cannot read seeds file {path}: {exc}") from None
    mapping = ResolveRules(resolve)
    seeds, bad = [], []
    for number, text in url_lines(lines):
        norm, reason, refused = check_url(text, rules, allow_private, mapping)
        if norm is None:
            bad.append(BadLine(path, number, text, reason or "", refused))
        else:
            seeds.append(text)
    if bad:
        raise SeedsError(report_lines(bad))
    if not seeds:
        raise SeedsError([f"seeds file {path} holds no URL (only blank lines and comments); nothing to crawl"])
    return seeds


# Paths that name a sitemap or feed rather than a page (``submit --kind auto``).
_DOCUMENT_SUFFIXES = (".xml", ".xml.gz", ".rss", ".atom", ".rdf", "/feed", "/rss", "/atom")


def document_kind(url: str) -> str:
    """``sitemap`` when a URL's path looks like a sitemap or feed, else ``page``. A guess
    that costs nothing when wrong: an HTML answer to a sitemap fetch is parsed as a page."""
    path = urlsplit(url).path.lower().rstrip("/") or "/"
    return "sitemap" if path.endswith(_DOCUMENT_SUFFIXES) or "sitemap" in path.rsplit("/", 1)[-1] else "page"


def submit_urls(
    store: Store,
    urls: Iterable[str],
    now_ms: int,
    priority: float = PRIORITY_SEED,
    source: str = "seed",
    *,
    reason: str = "",
    kind: str = "page",
    requeue_known: bool = False,
) -> SeedReport:
    """Queues URLs never seen before (one batched key-set read, then frontier-then-seen
    writes); with ``requeue_known``, URLs the crawl knows are queued again too, now, with
    their stored revisit state (so the fetch is conditional): an urgent recrawl.

    Args:
        kind: ``page``, ``sitemap`` (a sitemap or feed, read for URLs) or ``auto``
            (:func:`document_kind` by path).
        reason: Why, kept on the frontier row and the seen-set row.
    """
    report = SeedReport()
    offered: dict[int, Candidate] = {}
    for url in urls:
        try:
            norm = normalize(url)
        except InvalidURL as exc:
            report.rejected.append({"url": url, "reason": str(exc)})
            continue
        fp = fingerprint(norm)
        if fp in offered:
            report.duplicates += 1
            continue
        what = document_kind(norm) if kind == "auto" else kind
        offered[fp] = Candidate(fp=fp, url=norm, host=host_of(norm), depth=0, priority=priority, source=source, inlinks=0, kind=what)
    known = store.read_keys("urls", [fp_key(fp) for fp in offered], keys_only=not requeue_known)
    new = [c for fp, c in sorted(offered.items()) if fp_key(fp) not in known]
    report.duplicates += len(offered) - len(new)
    if source == "seed":
        # The operator vouches for a seed's site: its domain's budget counts extra linkers.
        credit_seed_domains(store, {c.host for c in offered.values()})
    queue_new_urls(store, new, now_ms, reason=reason)
    report.accepted = len(new)
    if requeue_known and known:
        again = [_requeued(offered[fp], known[fp_key(fp)], now_ms, reason) for fp in sorted(offered) if fp_key(fp) in known]
        for i in range(0, len(again), 5000):
            store.mutate("frontier", [Mutation.set(e.key, e.to_cells()) for e in again[i : i + 5000]])
        store.mutate("urls", [Mutation.set(fp_key(e.fp), {"u:reason": json.dumps(reason or None).encode()}) for e in again])
        report.accepted += len(again)
        report.duplicates -= len(again)
    return report


def _requeued(cand: Candidate, cells: dict[str, bytes], now_ms: int, reason: str) -> FrontierEntry:
    """A known URL queued again by hand, with what the seen set knows of it."""

    try:
        known = UrlState.from_cells(cells)
    except (ValueError, TypeError):  # a row written by something else: queue it afresh
        known = UrlState(url=cand.url)
    revisit = known.revisit if isinstance(known.revisit, dict) else None
    depth = known.depth
    # Its scheduled visit is replaced, not doubled: that row goes when this one is done.
    scheduled = scheduled_key(cand.fp, revisit, now_ms)
    return FrontierEntry(
        url=cand.url, fp=cand.fp, host=cand.host, due_ms=now_ms, priority=cand.priority,
        depth=depth if isinstance(depth, int) else 0, source=cand.source, kind=cand.kind, reason=reason,
        revisit=revisit, also_keys=[scheduled.hex()] if scheduled else [],
    )  # fmt: skip


class RoundLease:
    """The crawl's lease: held while a round runs, so rounds never overlap on one crawl.

    Held for as long as the crawl runs, however long its rounds take: a thread renews it
    (``check_and_set`` from the value this process wrote, every ``renew_every`` seconds) for
    another ``ttl``. A renewal that finds another value has lost the lease, and so has a
    lease that expired unrenewed; :meth:`check`, called before each commit, then raises
    :class:`LeaseLost`.
    """

    def __init__(self, store: Store, ttl: float = LEASE_TTL, renew_every: float | None = None) -> None:
        self.store = store
        self.ttl = ttl
        self.renew_every = renew_every if renew_every is not None else max(0.05, ttl / 4)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.value: bytes | None = None
        self.acquired = 0.0
        self.lost: str | None = None  # why the lease is no longer ours, once it is not
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _row(self, now: float) -> bytes:
        return json.dumps({"owner": self.owner, "acquired": self.acquired, "expires": now + self.ttl}).encode()

    def acquire(self) -> None:
        current = self.store.read_keys("meta", [LEASE_KEY]).get(LEASE_KEY, {}).get("m:lease")
        if current is not None:
            held = json.loads(current)
            if held.get("expires", 0) > time.time() and not _owner_gone(held.get("owner", ""), held.get("acquired")):
                raise LeaseHeld(
                    f"another round of this crawl is running (lease held by {held.get('owner')} "
                    f"until {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(held['expires']))})"
                )
        self.acquired = time.time()
        mine = self._row(self.acquired)
        if not self.store.check_and_set("meta", LEASE_KEY, "m:lease", current, mine):
            raise LeaseHeld("another round of this crawl took the lease just now")
        self.value = mine
        self.lost = None
        _HELD_HERE.add(self.owner)
        self._stop.clear()
        self._renewer = threading.Thread(target=self._keep, name="beamcrawl-lease", daemon=True)
        self._renewer.start()

    def _keep(self) -> None:
        while not self._stop.wait(self.renew_every):
            if not self.renew():
                return

    def renew(self) -> bool:
        """Extends the lease by ``ttl`` from now; False once it is lost."""
        with self._lock:
            if self.value is None or self.lost is not None:
                return False
            now = time.time()
            held_until = json.loads(self.value).get("expires", 0)
            fresh = self._row(now)
            try:
                renewed = self.store.check_and_set("meta", LEASE_KEY, "m:lease", self.value, fresh)
            except Exception as exc:  # the store unreachable for a moment: try again later
                log.warning("could not renew the crawl's lease: %s", exc)
                if now > held_until:
                    self.lost = f"it expired at {_when(held_until)} while the store was unreachable"
                    return False
                return True
            if renewed:
                self.value = fresh
                return True
            self.lost = self._taken_by()
            log.error("the crawl's lease was lost: %s", self.lost)
            return False

    def _taken_by(self) -> str:
        current = self.store.read_keys("meta", [LEASE_KEY]).get(LEASE_KEY, {}).get("m:lease")
        if current is None:
            return "its row was removed"
        try:
            return f"taken by {json.loads(current).get('owner')}"
        except (ValueError, AttributeError):
            return "its row was overwritten"

    def check(self, what: str) -> None:
        """Raises LeaseLost (``"<what>: ..."``, one line) unless this process still holds
        the lease, as read from the store now."""
        with self._lock:
            if self.lost is None and self.value is not None:
                current = self.store.read_keys("meta", [LEASE_KEY]).get(LEASE_KEY, {}).get("m:lease")
                expires = json.loads(self.value).get("expires", 0)
                if current != self.value:
                    self.lost = self._taken_by()
                elif expires < time.time():
                    self.lost = f"it expired at {_when(expires)} unrenewed"
            lost = self.lost if self.value is not None else "it was never acquired"
        if lost is not None:
            raise LeaseLost(f"{what}: the crawl's lease was lost ({lost}); another run may hold it")

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=30)
            self._renewer = None
        with self._lock:
            if self.value is not None:
                if self.lost is None:  # never remove another owner's lease
                    self.store.check_and_set("meta", LEASE_KEY, "m:lease", self.value, None)
                self.value = None
                _HELD_HERE.discard(self.owner)

    def __enter__(self) -> "RoundLease":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


# Owners of the leases this process holds now: its own pid in a lease is a live owner
# only if listed here (else an earlier process had the same pid: a container rerun).
_HELD_HERE: set[str] = set()


def _owner_gone(owner: str, acquired: float | None = None) -> bool:
    """True when the lease's owner was a process on this machine that no longer runs
    (a crawl killed mid-round), so a rerun need not wait for the lease to expire.

    A pid can be reused: by this very process (a crawl rerun in a fresh container often
    gets the pid its killed predecessor had), or by any process started after the lease
    was taken (``acquired``, where the lease records it); neither is the owner.
    """
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return owner not in _HELD_HERE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # alive, another user's
    started = _process_started(pid)
    # The tolerance covers the start time's tick resolution and clock adjustments.
    return started is not None and acquired is not None and started > acquired + 2.0


def _process_started(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds), from /proc; None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/stat", encoding="ascii") as fh:
            boot = next(float(line.split()[1]) for line in fh if line.startswith("btime "))
        # Field 22 of stat (20th after the ")"-terminated command name): start, in ticks.
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def lease_ttl(round_window: float) -> float:
    """How long a round's lease lasts: its fetch window plus ample room for job start-up
    and tear-down on a cluster. A crashed launcher on another machine blocks the crawl at
    most this long; a dead local process releases it at once (see _owner_gone)."""
    return 3 * round_window + 3600.0


def next_round(store: Store) -> int:
    raw = store.read_keys("meta", [ROUND_KEY]).get(ROUND_KEY, {}).get("m:next")
    return int(raw) if raw else 1


def _commit(store: Store, outputs: RoundOutputs, notes: dict[str, Any] | None = None) -> dict[str, list[str]]:
    """Moves the round's files into place, then deletes the frontier rows it finished.

    A marker written first makes the commit resumable: a crash before it, and the rerun
    redoes the round (its frontier rows are still there); a crash after it, and the rerun
    finishes this commit instead (moving what is left, deleting the finished rows) rather
    than fetching and storing the same pages again. The round counter advances last.

    The round's dead letters are read back first: the frontier rows of the URLs they name
    are kept (not deleted with the finished ones), their failures are booked, and an
    element failing for the second round is quarantined (core/quarantine.py). ``notes``,
    if given, gets the newly quarantined elements.
    """
    crash_point("commit.before")
    outputs.mark_committing()
    moved = outputs.commit_files()
    crash_point("commit.after_files")
    letters = quarantine.read_letters(files.list_files(outputs.final("errors")))
    keep = quarantine.kept_fps(letters)
    newly = quarantine.book_failures(store, outputs.round_no, letters)
    if notes is not None:
        notes["quarantined"] = [f"{kind} {ident}" for kind, ident in newly]
    # The next visits first: a crash between the two leaves a URL queued twice (folded at
    # slot assignment), never not at all.
    requeued = 0
    for path in outputs.requeue_files():
        with files.open_read(path) as fh:
            rows = [read_requeue_line(line) for line in fh.read().decode("utf-8").splitlines() if line]
        for i in range(0, len(rows), 5000):
            store.mutate("frontier", [Mutation.set(k, cells) for k, cells in rows[i : i + 5000]])
        requeued += len(rows)
    crash_point("commit.after_requeue")
    finished = 0
    for path in outputs.done_files():
        with files.open_read(path) as fh:
            keys = [bytes.fromhex(line) for line in fh.read().decode("ascii").split()]
        if keep:  # a URL with a dead letter keeps its row, though another branch finished it
            keys = [k for k in keys if len(k) != 16 or key_fp(k[8:]) not in keep]
        for i in range(0, len(keys), 5000):
            store.mutate("frontier", [Mutation.delete_row(k) for k in keys[i : i + 5000]])
        finished += len(keys)
    crash_point("commit.after_frontier_deletes")
    store.mutate("meta", [Mutation.set(ROUND_KEY, {"m:next": str(outputs.round_no + 1).encode()})])
    outputs.discard_staging()
    log.info("round %d committed: %d frontier rows finished, %d revisits queued", outputs.round_no, finished, requeued)
    return moved


def _metrics(result: Any) -> dict[str, Any]:
    """Committed Beam counters and distributions as ``{"namespace/name": value}``."""
    out: dict[str, Any] = {}
    try:
        results = result.metrics().query()
    except Exception:  # some runners have no metrics API
        return out
    for counter in results.get("counters", []):
        key = f"{counter.key.metric.namespace}/{counter.key.metric.name}"
        out[key] = out.get(key, 0) + (counter.committed or 0)
    for dist in results.get("distributions", []):
        key = f"{dist.key.metric.namespace}/{dist.key.metric.name}"
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


# Where the runners log a failed bundle (with its traceback) before they raise.
_RUNNER_LOGGERS = ("apache_beam.runners.common", "apache_beam.runners.worker.sdk_worker",
                   "apache_beam.runners.worker.bundle_processor", "apache_beam.runners.portability.fn_api_runner.fn_runner")
_QUIET = _QuietInfrastructureFailures()


def run_round(
    cfg: CrawlConfig, pipeline_args: list[str], store: Store, round_no: int, lease: RoundLease | None = None
) -> dict[str, Any]:
    """Runs and commits one round (only while ``lease`` still holds); returns its report."""
    outputs = RoundOutputs(cfg.out, round_no)
    outputs.prepare()
    started = time.time()
    options = PipelineOptions(flags=pipeline_args)
    p = live.pipeline(options)  # FnApiRunner answers metrics polls while it runs
    round_pipeline.build(p, cfg, outputs, started)
    for name in _RUNNER_LOGGERS:
        if _QUIET not in logging.getLogger(name).filters:
            logging.getLogger(name).addFilter(_QUIET)
    try:
        result = live.run(p, round_no, cfg.round_window)  # live progress on stderr
    except Exception as exc:  # one element's failure never gets here (transforms/dead_letter.py)
        raise CrawlError(
            f"round {round_no} failed and committed nothing (rerun the crawl to retry it): {_root_cause(exc)}"
        ) from None
    fetch_done = time.time()
    metrics = _metrics(result)
    shuffled = job_shuffle_figures(p, result)
    if lease is not None:
        lease.check(f"round {round_no} not committed")  # its files stay staged, its rows queued
    notes: dict[str, Any] = {}
    moved = _commit(store, outputs, notes)
    finished = time.time()
    frontier_left = sum(1 for _ in store.read_range("frontier", keys_only=True))
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
        "frontier_size": frontier_left,
        "pages_per_second": round(pages / max(fetch_done - started, 1e-9), 2),
        # Bytes into GroupByKeys and side inputs, and main inputs held for a side input
        # (pipelines/job_metrics.py; None when the runner reports no PCollection sizes):
        # what a round costs a shuffle service.
        "shuffle_bytes": shuffled.get("shuffle_bytes"),
        "side_input_bytes": shuffled.get("side_input_bytes"),
        "materialised_bytes": shuffled.get("materialised_bytes"),
        "shuffle_bytes_by_step": shuffled.get("by_step"),
        "files": {kind: [p_[len(cfg.out) :].lstrip("/") for p_ in paths] for kind, paths in moved.items()},
        "metrics": metrics,
    }
    files.write_bytes(outputs.report_path(), json.dumps(report, indent=2, sort_keys=True, default=str).encode())
    # The latest round for monitoring: one file whatever the round (reports/beamcrawl.prom).
    prometheus.write_latest(report, os.path.dirname(outputs.report_path()))
    return report


def summary(report: dict[str, Any]) -> str:
    """One screen about a round, each figure with what it counts."""
    m = report["metrics"]
    status = {k.split("/")[-1]: v for k, v in m.items() if k.startswith("fetch/status/")}
    robots, sitemaps = report["robots_fetches"], report.get("sitemaps_read", 0)
    lines = [
        f"round {report['round']}: {report['responses']} responses in {report['pipeline_seconds']:.1f}s "
        f"({report['pages_per_second']:.1f}/s) from {report['hosts_planned']} hosts",
        # "responses" is every HTTP answer, whatever was asked for.
        f"  responses: {max(report['responses'] - robots - sitemaps, 0)} pages, {robots} robots.txt, "
        f"{sitemaps} sitemaps and feeds; status {' '.join(f'{k}={v}' for k, v in sorted(status.items())) or '-'}; "
        f"{report['bytes'] / 1e6:.2f} MB",
        f"  due {report['urls_due']}, assigned {report['urls_assigned']} (a host gets at most window / delay; "
        f"the rest stay queued), robots-disallowed {report['robots_disallowed']}",
        f"  deferred {report['deferred']} (assigned but left queued for the next round: "
        f"{_breakdown(m, 'fetch/deferred_reason/')})",
        f"  errors {report['fetch_errors']} (requests that got no HTTP answer; retried later with back-off: "
        f"{_breakdown(m, 'fetch/error_kind/')})",
        f"  refused by address policy {report.get('refused', 0)} (never connected: link-local always, loopback "
        f"and private addresses without --allow-private-networks)",
        f"  links found {report['links_found']}, refused by shape {report['links_refused_by_shape']}, "
        f"new URLs {report['new_urls']}, frontier now {report['frontier_size']}",
        f"  deferred by budgets {report['deferred_by_budgets']} (queued URLs set aside, due again later, never "
        f"deleted: over the domain's page budget {m.get('budgets/urls_over_budget', 0)}, over a host's or "
        f"domain's cap on new URLs or host names {m.get('budgets/urls_new_host_capped', 0)}; seeds and submissions "
        f"among them {report.get('operator_urls_deferred', 0)})",
        f"  revisits: changed {report.get('changed', 0)}, unchanged {report.get('unchanged', 0)} "
        f"({report.get('not_modified', 0)} by 304), dropped {report.get('dropped', 0)}",
    ]
    if report.get("errors") or report.get("quarantined"):
        by_stage = " ".join(f"{k}={v}" for k, v in sorted(report.get("errors_by_stage", {}).items()))
        lines.append(f"  set aside {report.get('errors', 0)} (errors/: {by_stage or '-'}); quarantined now {len(report.get('quarantined', []))}")
    for kind, paths in sorted(report["files"].items()):
        lines.append(f"  {kind}: {len(paths)} file(s)")
    return "\n".join(lines)


def _breakdown(metrics: dict[str, Any], prefix: str) -> str:
    """``a 3, b 1`` from the counters under ``prefix`` (largest first), or ``none``."""
    parts = sorted(((k[len(prefix) :], v) for k, v in metrics.items() if k.startswith(prefix) and v), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in parts) or "none"


def _remove_if_empty(folder: str) -> None:
    """Removes a local folder this run created, if nothing was written into it."""
    with contextlib.suppress(OSError):
        os.rmdir(folder)


@dataclass
class _Interrupt:
    hit: bool = False


@contextlib.contextmanager
def _watch_interrupt() -> Iterator[_Interrupt]:
    """Notes a Ctrl-C (SIGINT) while the block runs, then interrupts as usual; the runner
    may re-raise the KeyboardInterrupt as an error of its own, which this tells apart."""
    import signal
    import threading

    seen = _Interrupt()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def note(signum: int, frame: Any) -> None:
        seen.hit = True
        # The runner logs the interrupt as an error of each step it unwinds: not news.
        logging.disable(logging.CRITICAL)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)
        if seen.hit:
            logging.disable(logging.NOTSET)


def _require_gcs_credentials(out: str) -> None:
    """Fails at once, in one line, where Cloud Storage would retry unauthenticated for minutes."""
    from beamcrawl.core.gcp import NoCredentials, require_credentials

    try:
        require_credentials(f"output folder {out}", "or give a local --out folder")
    except NoCredentials as exc:
        raise CrawlError(str(exc)) from None


def crawl(
    cfg: CrawlConfig, rounds: int, seeds: list[str], pipeline_args: list[str], out: TextIO = sys.stdout,
    *, exit_when_idle: bool = False,
) -> list[dict[str, Any]]:
    """Seeds the frontier and runs ``rounds`` rounds; returns their reports.

    Before each round, when nothing can be fetched, it says when the next URL falls due and
    waits for it (``pipelines/idle.py``), or stops with ``exit_when_idle``: a wait is not
    a round.
    """
    created = not files.is_remote(cfg.out) and not os.path.exists(cfg.out)
    if cfg.out.startswith("gs://"):
        _require_gcs_credentials(cfg.out)
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
    reports = []
    with store, RoundLease(store, ttl=lease_ttl(cfg.round_window)) as lease:
        if seeds:
            seeded = submit_urls(store, seeds, int(time.time() * 1000))
            print(f"seeds: {seeded.accepted} queued, {seeded.duplicates} already known", file=out)
        for _ in range(rounds):
            round_no = next_round(store)
            unfinished = RoundOutputs(cfg.out, round_no)
            if unfinished.committing():
                # The last run died while committing this round: finish it, don't redo it.
                lease.check(f"round {round_no} not committed")
                _commit(store, unfinished)
                print(f"round {round_no}: finished the commit a killed run had started", file=out, flush=True)
                continue
            if not idle.wait_until_due(store, cfg, out, exit_when_idle=exit_when_idle, label=f"round {round_no}: "):
                break
            print(f"round {round_no}: running (window {cfg.round_window:g}s) ...", file=out, flush=True)
            with _watch_interrupt() as interrupt:
                try:
                    report = run_round(cfg, pipeline_args, store, round_no, lease)
                except BaseException:
                    if interrupt.hit:  # Beam re-raises a KeyboardInterrupt as its own error
                        raise RoundInterrupted(round_no, unfinished.committing()) from None
                    raise
            print(summary(report), file=out, flush=True)
            reports.append(report)
            charts_after_round(cfg.out)  # OUT/reports/*.png; a failure is logged, never raised
    return reports
