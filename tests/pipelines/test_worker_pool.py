"""The SDK worker pool for Flink TaskManagers: workers keyed by caller and id, over real gRPC.

Each "TaskManager" here is its own gRPC channel to the pool (as each TaskManager's environment
is), and each worker a real process (a sleeping Python instead of Beam's harness, which would
need a control endpoint to talk to).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import grpc
import pytest
from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.pipelines import worker_pool
from thread_signals import stop_signals_as_from_a_terminal, tgkill, settled_threads_taking  # tests/thread_signals.py


# Each caller its own connection, as each TaskManager's (a Java channel's) is: Python's gRPC
# would otherwise share one connection between channels to the same address.
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


def _sleeper(control_url: str, worker_id: str) -> list[str]:
    return [sys.executable, "-c", "import time; time.sleep(120)", control_url, worker_id]


@pytest.fixture
def pool():
    keyed = worker_pool.KeyedWorkerPool(command=_sleeper)
    server, port = worker_pool.serve(keyed, "127.0.0.1", 0)
    channels: list[grpc.Channel] = []

    def caller() -> beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolStub:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=OWN_CONNECTION)
        channels.append(channel)
        return beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolStub(channel)

    yield keyed, caller
    for channel in channels:
        channel.close()
    server.stop(None)
    keyed.stop_all()


def _start(stub, worker_id: str, control: str) -> None:
    request = beam_fn_api_pb2.StartWorkerRequest(worker_id=worker_id)
    request.control_endpoint.url = control
    assert stub.StartWorker(request).error == ""


def _stop(stub, worker_id: str) -> None:
    stub.StopWorker(beam_fn_api_pb2.StopWorkerRequest(worker_id=worker_id))


def _procs_by_control(keyed) -> dict[str, object]:
    return {proc.args[3]: proc for proc in keyed.workers().values()}


def _wait_exited(proc, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc.poll() is not None


def test_two_task_managers_with_the_same_worker_ids_stop_only_their_own(pool):
    keyed, caller = pool
    tm1, tm2 = caller(), caller()
    _start(tm1, "1-1", "localhost:1001")
    _start(tm2, "1-1", "localhost:2001")  # the other TaskManager numbers its workers alike
    procs = _procs_by_control(keyed)
    assert set(procs) == {"localhost:1001", "localhost:2001"}  # both run: neither replaced the other
    _stop(tm1, "1-1")
    assert _wait_exited(procs["localhost:1001"])
    assert procs["localhost:2001"].poll() is None  # the other TaskManager's worker lives on
    assert set(_procs_by_control(keyed)) == {"localhost:2001"}
    _stop(tm2, "1-1")
    assert _wait_exited(procs["localhost:2001"])
    assert keyed.workers() == {}


def test_a_stop_for_an_id_the_caller_never_started_stops_nothing(pool):
    keyed, caller = pool
    tm1, tm2 = caller(), caller()
    _start(tm1, "2-1", "localhost:1002")
    _stop(tm2, "2-1")
    time.sleep(0.2)
    (proc,) = keyed.workers().values()
    assert proc.poll() is None


worker_ids = st.lists(st.from_regex(r"[1-9]-[1-9]", fullmatch=True), min_size=1, max_size=4, unique=True)


@settings(max_examples=5, deadline=None)
@given(ids=worker_ids, stop_first=st.booleans())
def test_interleaved_starts_and_stops_of_two_callers_keep_each_callers_workers(ids, stop_first):
    """Two callers start the same ids; one of them stops all of its workers: exactly the
    other's stay alive, whichever caller goes first."""
    keyed = worker_pool.KeyedWorkerPool(command=_sleeper)
    server, port = worker_pool.serve(keyed, "127.0.0.1", 0)
    channels = [grpc.insecure_channel(f"127.0.0.1:{port}", options=OWN_CONNECTION) for _ in range(2)]
    try:
        stubs = [beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolStub(c) for c in channels]
        for worker_id in ids:
            for n, stub in enumerate(stubs):
                _start(stub, worker_id, f"tm{n}/{worker_id}")
        stopper = 0 if stop_first else 1
        for worker_id in ids:
            _stop(stubs[stopper], worker_id)
        alive = {proc.args[3] for proc in keyed.workers().values() if proc.poll() is None}
        assert alive == {f"tm{1 - stopper}/{worker_id}" for worker_id in ids}
    finally:
        for channel in channels:
            channel.close()
        server.stop(None)
        keyed.stop_all()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_pool_process_stops_on_a_signal_that_lands_on_any_of_its_threads(sig):
    """The kernel may hand the TaskManager host's SIGTERM to one of gRPC's threads; the pool
    acts on it on its main thread, which once waited on an Event with no timeout and so
    never woke. Aimed at the last thread that can take it (a gRPC one), it stops at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, "-m", "beamcrawl.pipelines.worker_pool", "--port", str(port)],
        stderr=subprocess.PIPE, text=True, preexec_fn=stop_signals_as_from_a_terminal,
    )  # fmt: skip
    try:
        assert child.stderr is not None
        while "listening on" not in (line := child.stderr.readline()):
            assert line, "the pool ended before it listened"
        targets = settled_threads_taking(child.pid, sig)
        assert targets[0] == child.pid and len(targets) >= 2, targets
        tgkill(child.pid, targets[-1], sig)
        assert child.wait(timeout=20) == 0
    finally:
        child.kill()
        child.wait()
