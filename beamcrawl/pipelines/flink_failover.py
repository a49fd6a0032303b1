"""A round's Flink job watched for failovers: when Flink fails tasks over (a TaskManager lost,
a task failed) the round's fetch loops are fenced at once, before the restarted tasks start.

Flink's restart strategy (pipelines/flink_cluster.py: ``fixed-delay``) restarts the job's tasks
in place, so the round's attempt token stays the same; the tasks it cancelled, or lost with
their TaskManager, may leave SDK workers that go on fetching (a worker's environment outlives
its task, and a lost TaskManager's worker is never told to stop). The launcher therefore polls
the job's state on the REST API (``/jobs/<id>``, every :data:`WATCH_EVERY` seconds) and, each
time it leaves ``RUNNING`` for a failure state (``RESTARTING``, ``FAILING``, ``CANCELLING``...),
revokes the round's shard claims (state/fence.py): every fetch loop of the failed try stops
within ``FENCE_INTERVAL``, and the restarted tasks claim their shards afresh. (Flink adds a
failure to ``/jobs/<id>/exceptions`` only when it restarts, when the new tasks may already be
claiming: too late to fence by. A failover of one region, with the job left ``RUNNING``, is
fenced by the restarted task's own claim when it starts.)

Only a remote Flink master (``--flink_master HOST:PORT``) is watched; other runners retry in
their own ways and need nothing here. The same REST API gives, once the job has finished,
what Flink counted its tasks exchanging (:func:`flink_task_bytes`, for the round's report).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import urllib.request
import zlib
from typing import Any, Callable, Iterator, Sequence

from beamcrawl.pipelines.runner_args import option_value, runner_name

log = logging.getLogger(__name__)

WATCH_EVERY = 0.5


def rest_address(args: Sequence[str]) -> str | None:
    """The REST address of the Flink cluster ``args`` send the round to, or None (not Flink,
    or Flink's local mini-cluster)."""
    if runner_name(args).lower() not in ("flinkrunner", "flink"):
        return None
    master = (option_value(args, "flink_master") or "").removeprefix("http://").removeprefix("https://").rstrip("/")
    if not master or master.startswith("["):
        return None
    return master


def job_name(round_no: int, attempt: str) -> str:
    """The Flink job name a round's attempt is submitted under (``--job_name``)."""
    return f"beamcrawl-round-{round_no}-{zlib.crc32(attempt.encode()):08x}"


# The job states a failure moves a running job to (Flink's JobStatus).
FAILURE_STATES = frozenset({"RESTARTING", "FAILING", "FAILED", "CANCELLING", "CANCELED", "SUSPENDED"})


def failed_over(previous: str | None, state: str) -> bool:
    """Whether a job that was in ``previous`` and is in ``state`` now has just failed: it
    left ``RUNNING`` (or was first seen) in a failure state."""
    return state in FAILURE_STATES and previous not in FAILURE_STATES


def _get(address: str, path: str, timeout: float = 5.0) -> dict:
    with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as resp:
        return json.loads(resp.read())


def flink_task_bytes(address: str, job_name: str, timeout: float = 5.0, settle: float = 10.0) -> dict[str, Any]:
    """What Flink itself counted its tasks sending one another for the job ``job_name`` on
    the session cluster whose REST API is at ``address``: ``{}`` when it cannot say (or the
    job did not finish within ``settle`` seconds of being asked).

    Flink's ``read-bytes`` and ``write-bytes`` of a job vertex are the bytes its subtasks
    read from and wrote to other tasks (serialised records; chained operators exchange
    nothing). A Beam ``GroupByKey`` is a ``GroupReduce`` vertex: its ``read-bytes`` are what
    crossed that shuffle (after Flink's partial grouping, chained before it).

    Returns:
        ``bytes_between_tasks`` (every vertex's ``write-bytes``), ``bytes_into_groups`` (the
        ``GroupReduce`` vertices' ``read-bytes``) and ``vertices`` (how many).
    """

    def get(path: str) -> dict:
        return _get(address, path, timeout)

    try:
        jobs = [job for job in get("/jobs/overview").get("jobs", []) if job.get("name") == job_name]
        if not jobs:
            return {}
        job = max(jobs, key=lambda j: j.get("start-time", 0))
        # The REST API answers from a cache of the job (up to web.refresh-interval old): asked
        # as the job ends, it may still show the job running, its counts not final.
        deadline = time.monotonic() + settle
        while True:
            detail = get(f"/jobs/{job['jid']}")
            if detail.get("state") in ("FINISHED", "FAILED", "CANCELED") or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        if detail.get("state") != "FINISHED":
            return {}
        vertices = detail.get("vertices", [])
        between = sum(int(v.get("metrics", {}).get("write-bytes", 0)) for v in vertices)
        into = sum(
            int(v.get("metrics", {}).get("read-bytes", 0))
            for v in vertices
            if str(v.get("name", "")).startswith("GroupReduce")
        )
    except (OSError, ValueError, TypeError, KeyError) as exc:  # a figure, never the round's failure
        log.debug("no task bytes from the Flink cluster at %s: %s", address, exc)
        return {}
    return {"bytes_between_tasks": between, "bytes_into_groups": into, "vertices": len(vertices)}


class FailoverWatch:
    """Polls the job named ``name`` on the cluster at ``address``; calls ``on_failure`` (from
    the thread of the watch) each time the job fails over."""

    def __init__(self, address: str, name: str, on_failure: Callable[[], None], every: float = WATCH_EVERY) -> None:
        self.address = address
        self.name = name
        self.on_failure = on_failure
        self.every = every
        self.job_id: str | None = None
        self.state: str | None = None
        self.failed_at: list[float] = []  # when each failure was acted on (epoch seconds)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="beamcrawl-flink-failover", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.poll()
            except (OSError, ValueError) as exc:  # the REST API busy or restarting: next time
                log.debug("flink failover watch: %s", exc)

    def poll(self) -> None:
        if self.job_id is None:
            jobs = _get(self.address, "/jobs/overview").get("jobs", [])
            mine = [job for job in jobs if job.get("name") == self.name]
            if not mine:
                return
            self.job_id = max(mine, key=lambda job: job.get("start-time", 0))["jid"]
        state = str(_get(self.address, f"/jobs/{self.job_id}").get("state", ""))
        previous, self.state = self.state, state
        if failed_over(previous, state):
            self.failed_at.append(time.time())
            log.warning(
                "flink: the round's job %s is %s (failure %d): fencing its fetch loops",
                self.job_id,
                state,
                len(self.failed_at),
            )
            self.on_failure()

    def __enter__(self) -> "FailoverWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


@contextlib.contextmanager
def watching(args: Sequence[str], name: str, on_failure: Callable[[], None]) -> Iterator[FailoverWatch | None]:
    """A :class:`FailoverWatch` for the block when ``args`` send the round to a remote Flink
    cluster; else nothing is watched (None)."""
    address = rest_address(args)
    if address is None:
        yield None
        return
    with FailoverWatch(address, name, on_failure) as watch:
        yield watch
