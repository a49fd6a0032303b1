"""The session cluster's set-up without starting it: each process's flink-conf.yaml, and
``beamcrawl flink-cluster`` on a folder with no cluster. Its rounds run in test_flink_cluster.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from beamcrawl.cli import flink_cluster as cli
from beamcrawl.pipelines import flink_cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from loopback import LoopbackServer, serving  # noqa: E402  (tests/loopback.py)

ports = st.integers(min_value=1024, max_value=65535)


@given(rest=ports, rpc=ports, slots=st.integers(1, 8), tms=st.integers(1, 4))
def test_every_process_listens_on_loopback_with_the_settings_batch_rounds_need(tmp_path_factory, rest, rpc, slots, tms):
    folder = tmp_path_factory.mktemp("cluster")
    cfg = flink_cluster.ClusterConfig(rest_port=rest, rpc_port=rpc, slots=slots, task_managers=tms)
    confs = {role: yaml.safe_load(flink_cluster.flink_conf(cfg, folder, role))
             for role in ["jobmanager"] + [f"taskmanager-{i}" for i in range(1, tms + 1)]}  # fmt: skip
    for role, conf in confs.items():
        assert conf["jobmanager.rpc.port"] == rpc and conf["rest.port"] == rest
        assert {conf["jobmanager.bind-host"], conf["rest.bind-address"]} == {"localhost"}
        assert conf["classloader.resolve-order"] == "parent-first"  # Beam's classes loaded once
        assert conf["taskmanager.network.sort-shuffle.min-buffers"] >= 64
        assert conf["restart-strategy"] == "fixed-delay" and conf["restart-strategy.fixed-delay.attempts"] >= 1
        assert conf["taskmanager.numberOfTaskSlots"] == slots
        assert str(folder) in conf["io.tmp.dirs"] and role in conf["io.tmp.dirs"]  # scratch space of its own
    task_managers = {role: conf for role, conf in confs.items() if role != "jobmanager"}
    assert all(conf["taskmanager.bind-host"] == "localhost" for conf in task_managers.values())
    assert sorted(conf["taskmanager.resource-id"] for conf in task_managers.values()) == sorted(task_managers)
    assert "taskmanager.resource-id" not in confs["jobmanager"]


def test_status_and_stop_of_a_folder_without_a_cluster(tmp_path, capsys):
    assert cli.main(["status", "--dir", str(tmp_path)]) == 3
    assert json.loads(capsys.readouterr().out)["running"] is False
    assert cli.main(["stop", "--dir", str(tmp_path)]) == 0
    assert "no cluster was running" in capsys.readouterr().out


def test_start_refuses_a_port_in_use_in_one_line(tmp_path, capsys):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert cli.main(["start", "--dir", str(tmp_path), "--rest-port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"port {port} is in use" in err and "--rest-port" in err and err.count("\n") == 1
    assert not (tmp_path / flink_cluster.STATE).exists()  # nothing was started


class _Overview(LoopbackServer):
    """Answers ``/overview`` as a JobManager would, with the counts of :attr:`counts`."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(self.counts)


def test_a_cluster_is_ready_only_when_every_task_manager_has_reported_its_slots():
    """A TaskManager registers first and sends its slot report after: an ``/overview`` that
    counts every TaskManager but not yet their slots is not a ready cluster (CI once saw
    2 TaskManagers with 2 slots of 4 right after ``start`` returned)."""
    with serving(_Overview()) as server:

        @given(
            tms=st.integers(1, 4), slots=st.integers(1, 8), registered=st.integers(0, 4), reported=st.integers(0, 32)
        )
        def check(tms, slots, registered, reported):
            server.counts = {"taskmanagers": registered, "slots-total": reported}
            ready = flink_cluster._registered(server.port, tms, slots)
            assert ready == (registered >= tms and reported >= tms * slots)

        check()
        server.counts = {}  # a JobManager that does not count yet
        assert not flink_cluster._registered(server.port, 1, 1)
