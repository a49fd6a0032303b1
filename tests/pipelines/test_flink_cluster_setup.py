"""The session cluster's set-up without starting it: each process's flink-conf.yaml, and
``beamcrawl flink-cluster`` on a folder with no cluster. Its rounds run in test_flink_cluster.py."""

from __future__ import annotations

import json

import yaml
from hypothesis import given
from hypothesis import strategies as st

from beamcrawl.cli import flink_cluster as cli
from beamcrawl.pipelines import flink_cluster

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
