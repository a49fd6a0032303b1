"""A pool of Python SDK workers for Flink TaskManagers (``--environment_type EXTERNAL``).

A TaskManager that runs a Python stage asks the pool at ``--environment_config HOST:PORT`` to
start an SDK worker (``StartWorker``: an id and the TaskManager's control endpoint) and later to
stop it (``StopWorker``: the id alone). Every TaskManager numbers its workers from the same
start (``1-1``, ``2-1``, ...), so with two TaskManagers on one pool two live workers share an
id. Beam's own pool keeps one worker per id: the second start overwrites the first, and one
TaskManager's stop kills the other's worker, which then never answers ("Still waiting for
startup of environment"). This pool keys each worker by its caller and its id. The caller is
the gRPC peer (the TaskManager's connection: the Java side keeps one channel per environment
for its start and its stop), so a stop reaches only the worker its own caller started.

One pool for all TaskManagers rather than one per TaskManager: every TaskManager of a job gets
the same ``--environment_config``, so pools per TaskManager would each need their own address
behind one name (a network namespace or a pod each, as on Kubernetes). Keyed by caller, one
pool on each machine serves every TaskManager there.

Each worker is a process of this Python (the pool's virtualenv) with the pool's environment:
``PATH``, ``BIGTABLE_EMULATOR_HOST`` and credentials are whatever the pool was started with.

    python -m beamcrawl.pipelines.worker_pool --port 50000 [--bind 127.0.0.1]
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
from concurrent import futures
from typing import Callable, Sequence

import grpc

from beamcrawl.core.runtime.interruptible import WAKE_EVERY

log = logging.getLogger(__name__)

# How long a stopped worker has to exit after SIGTERM before it is killed.
STOP_GRACE = 10.0

WorkerCommand = Callable[[str, str], list[str]]


def sdk_worker_command(control_url: str, worker_id: str) -> list[str]:
    """The command line of one SDK worker: Beam's harness in a process of this Python."""
    code = (
        "import logging, sys; logging.basicConfig(level=logging.WARNING, stream=sys.stderr); "
        "from apache_beam.runners.worker.sdk_worker import SdkHarness; "
        f"SdkHarness({control_url!r}, worker_id={worker_id!r}).run()"
    )
    return [sys.executable, "-c", code]


def worker_key(peer: str, worker_id: str) -> tuple[str, str]:
    """A worker's key in the pool: who asked for it (the gRPC peer) and the id it was given."""
    return (peer, worker_id)


class KeyedWorkerPool:
    """The pool's servicer: workers by (caller, id), each its own process.

    Args:
        command: The command line of a worker, from its control endpoint and id.
        log_file: Where the workers' output goes (an open file, or None for the pool's stderr).
    """

    def __init__(self, command: WorkerCommand = sdk_worker_command, log_file=None) -> None:
        self._command = command
        self._log_file = log_file
        self._lock = threading.Lock()
        self._workers: dict[tuple[str, str], subprocess.Popen] = {}

    def StartWorker(self, request, context):
        from apache_beam.portability.api import beam_fn_api_pb2

        key = worker_key(context.peer(), request.worker_id)
        try:
            proc = subprocess.Popen(
                self._command(request.control_endpoint.url, request.worker_id),
                stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=self._log_file,
                close_fds=True,
            )  # fmt: skip
        except OSError as exc:
            return beam_fn_api_pb2.StartWorkerResponse(error=f"cannot start an SDK worker: {exc}")
        with self._lock:
            self._reap()
            previous = self._workers.pop(key, None)
            self._workers[key] = proc
        if previous is not None:  # the same caller reusing an id: its old worker is done
            _stop(previous)
        log.info("started SDK worker %s for %s (pid %d)", request.worker_id, key[0], proc.pid)
        return beam_fn_api_pb2.StartWorkerResponse()

    def StopWorker(self, request, context):
        from apache_beam.portability.api import beam_fn_api_pb2

        key = worker_key(context.peer(), request.worker_id)
        with self._lock:
            proc = self._workers.pop(key, None)
        if proc is None:
            # Not this caller's worker (or gone already): never stop another caller's worker
            # of the same id. A worker whose control stream closes exits by itself.
            log.info("stop of SDK worker %s from %s: no such worker of that caller", request.worker_id, key[0])
        else:
            log.info("stopping SDK worker %s for %s (pid %d)", request.worker_id, key[0], proc.pid)
            _stop(proc)
        return beam_fn_api_pb2.StopWorkerResponse()

    def workers(self) -> dict[tuple[str, str], subprocess.Popen]:
        """The workers the pool has started and not stopped (a copy)."""
        with self._lock:
            return dict(self._workers)

    def stop_all(self) -> None:
        with self._lock:
            procs, self._workers = list(self._workers.values()), {}
        for proc in procs:
            _stop(proc)

    def _reap(self) -> None:
        """Forgets workers that have exited by themselves (their caller closed their stream)."""
        for key, proc in list(self._workers.items()):
            if proc.poll() is not None:
                del self._workers[key]


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(STOP_GRACE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def serve(pool: KeyedWorkerPool, bind: str, port: int) -> tuple[grpc.Server, int]:
    """Starts the pool's gRPC server on ``bind:port`` (0: any free port); returns it and its port."""
    from apache_beam.portability.api import beam_fn_api_pb2_grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    bound = server.add_insecure_port(f"{bind}:{port}")
    if bound == 0:
        raise OSError(f"the worker pool cannot listen on {bind}:{port}")
    server.start()
    return server, bound


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m beamcrawl.pipelines.worker_pool", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--port", type=int, required=True, help="Port to listen on (the TaskManagers' --environment_config)."
    )
    parser.add_argument("--bind", default="127.0.0.1", help="Address to listen on (default 127.0.0.1).")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Before it listens: a stop that comes as soon as it is up stops its workers too.
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    pool = KeyedWorkerPool()
    server, port = serve(pool, args.bind, args.port)
    log.info("SDK worker pool listening on %s:%d (python %s, pid %d)", args.bind, port, sys.executable, os.getpid())
    while not done.wait(WAKE_EVERY):  # a signal delivered to a gRPC thread is handled here within that
        pass
    server.stop(2)
    pool.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
