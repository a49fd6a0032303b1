"""The local runner's worker processes (``--direct_running_mode=multi_processing``), started
without the Google Cloud client libraries no stage of a round uses.

Beam starts each such worker as ``python -m apache_beam.runners.worker.sdk_worker_main``.
Importing that imports ``apache_beam.io`` with its GCP modules, and they import every client
library they find installed: Dataflow's job client (``google.cloud.dataflow_v1beta3``), BigQuery
and its storage API, Pub/Sub. beamcrawl installs some of those packages for its own use
(Bigtable, Cloud Storage, Dataflow launches from the CLI), so a worker found all of them: 161
MB resident before it reads an element, against 142 MB without the four above, and 0.4 s less
of its start's CPU (``python -X importtime``). Each round's workers start afresh, so that is
paid by every worker of every round.

The workers here run :func:`main`, which makes those four packages absent (an import of them
raises ``ModuleNotFoundError``, which Beam's optional imports expect: they leave BigQuery's and
Pub/Sub's I/O unavailable, which no round uses), then Beam's own harness. The Bigtable client
and Cloud Storage's are not among them: a worker reads and writes the Bigtable store, and a
round's files may be on ``gs://``. Workers on Flink, Prism or Dataflow, which their runners
start, are left as they are.

The process that launches the rounds (``beamcrawl crawl``) drops the same four, by
:func:`leave_out_for_runner`, when its runner is one that runs the rounds on this machine or
through a portable job server: it runs every stage itself in process, and with
``multi_processing`` it is the runner that feeds the workers, 18 MB and half a second of CPU
less at its start either way. With Dataflow's runner, which submits jobs through Dataflow's
client, or a runner it does not know, it keeps them.

    python -m beamcrawl.pipelines.sdk_worker   # what the local runner starts, with Beam's environment
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import threading
from typing import Any, Iterator, Sequence

__all__ = [
    "ABSENT",
    "BEAM_WORKER",
    "absent_clients",
    "leave_out_for_runner",
    "local_workers",
    "main",
    "worker_command",
]

# Packages a worker of a round never imports for itself, made absent in it (and their modules).
ABSENT = (
    "google.cloud.dataflow_v1beta3",
    "google.cloud.bigquery",
    "google.cloud.bigquery_storage",
    "google.cloud.bigquery_storage_v1",
    "google.cloud.pubsub",
    "google.cloud.pubsub_v1",
)
# The command Beam's FnApiRunner starts a multi_processing worker with (fn_runner.py).
BEAM_WORKER = "-m apache_beam.runners.worker.sdk_worker_main"
# Runners (as Beam resolves a name: any case, "Runner" left off) whose launching process uses
# none of ABSENT: Beam's local runners, Prism, and the portable ones (a job server's client).
WITHOUT_CLIENTS = frozenset({"fnapi", "direct", "switchingdirect", "bundlebaseddirect", "prism", "flink", "portable"})


class _Absent(importlib.abc.MetaPathFinder):
    """A finder that answers for the packages in :data:`ABSENT`: not there."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if any(fullname == n or fullname.startswith(n + ".") for n in self.names):
            raise ModuleNotFoundError(f"{fullname} is left out of beamcrawl's local workers", name=fullname)
        return None


def absent_clients(names: Sequence[str] = ABSENT) -> None:
    """Makes ``names`` absent in this process from now on (before anything imports them)."""
    if not any(isinstance(f, _Absent) for f in sys.meta_path):
        sys.meta_path.insert(0, _Absent(names))


def leave_out_for_runner(beam_args: Sequence[str]) -> bool:
    """In the process that launches rounds, before it imports Beam: makes :data:`ABSENT` absent
    when the runner ``beam_args`` name (the local one when they name none) is in
    :data:`WITHOUT_CLIENTS`. True when it did; Dataflow's runner, a class's dotted path and any
    other runner keep the clients."""
    from beamcrawl.pipelines.runner_args import runner_name

    name = runner_name(beam_args).lower().removesuffix("runner")
    if name not in WITHOUT_CLIENTS:
        return False
    absent_clients()
    return True


def worker_command(python: str | None = None) -> str:
    """The command line of one local worker: this module under ``python`` (this one's)."""
    return f"{python or sys.executable} -m {__name__}"


_PATCH_LOCK = threading.Lock()
_patched = 0  # runs inside local_workers() now, in any thread
_beams: Any = None  # Beam's own from_command_string (its classmethod), while patched


@contextlib.contextmanager
def local_workers() -> Iterator[None]:
    """While a pipeline is handed to the FnApiRunner: the worker processes it starts for
    ``multi_processing`` run :func:`main` instead of Beam's harness module. Any other command
    (one a user set) is left as given. Runs in several threads at once share one patch, taken
    away when the last ends."""
    global _patched, _beams
    # Imported here, not at the top: a worker runs this module, and Beam imported before
    # absent_clients() would import the clients too.
    from apache_beam.transforms import environments

    env = environments.SubprocessSDKEnvironment
    with _PATCH_LOCK:
        if not _patched:
            _beams = env.__dict__["from_command_string"]
            env.from_command_string = classmethod(_from_command_string)  # type: ignore[method-assign, assignment]
        _patched += 1
    try:
        yield
    finally:
        with _PATCH_LOCK:
            _patched -= 1
            if not _patched:
                env.from_command_string = _beams  # type: ignore[method-assign]


def _from_command_string(cls: Any, command_string: str) -> Any:
    if command_string == f"{sys.executable} {BEAM_WORKER}":
        command_string = worker_command()
    return _beams.__func__(cls, command_string)


def main(argv: Sequence[str] | None = None) -> None:
    """Beam's SDK harness, in a process where :data:`ABSENT` is absent."""
    absent_clients()
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main(list(argv if argv is not None else sys.argv))


if __name__ == "__main__":
    main()
