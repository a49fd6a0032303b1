"""Runner choice: which runners may use the embedded store, and Beam argument handling."""

from __future__ import annotations

import pytest

from beamcrawl.pipelines.runners import (
    RunnerSetupError,
    check_store_for_runner,
    is_remote,
    option_value,
    with_local_runner,
)


def test_option_value_reads_both_spellings_last_wins():
    args = ["--runner", "FlinkRunner", "--flink_master=host:8081", "--runner=PrismRunner"]
    assert option_value(args, "runner") == "PrismRunner"
    assert option_value(args, "flink_master") == "host:8081"
    assert option_value(args, "missing") is None


@pytest.mark.parametrize(
    "args, remote",
    [
        ([], False),
        (["--runner=FnApiRunner"], False),
        (["--runner=DirectRunner"], False),
        (["--runner=PrismRunner"], False),
        (["--runner=FlinkRunner"], False),
        (["--runner=FlinkRunner", "--flink_master=[local]"], False),
        (["--runner=FlinkRunner", "--flink_master=flink.internal:8081"], True),
        (["--runner=PortableRunner", "--job_endpoint=embed"], False),
        (["--runner=PortableRunner", "--job_endpoint=jobs.internal:8099"], True),
        # a session cluster on this machine: its workers are the pool's, not this process
        (["--runner=FlinkRunner", "--flink_master=localhost:8081", "--environment_type=EXTERNAL"], True),
        (["--runner=FlinkRunner", "--flink_master=[local]", "--environment_type=EXTERNAL"], True),
        (["--runner=FlinkRunner", "--flink_master=[local]", "--environment_type=LOOPBACK"], False),
        (["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=EXTERNAL"], True),
        (["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=docker"], True),
        (["--runner=PortableRunner", "--job_endpoint=localhost:8099", "--environment_type=LOOPBACK"], False),
        (["--runner=DataflowRunner"], True),
        (["--runner=SomeFutureRunner"], True),
    ],
)
def test_is_remote(args, remote):
    assert is_remote(args) is remote


def test_embedded_store_refused_on_a_cluster_with_a_reason_and_a_fix():
    with pytest.raises(RunnerSetupError) as exc:
        check_store_for_runner("sqlite:///tmp/x/store.sqlite", ["--runner=DataflowRunner"])
    message = str(exc.value)
    assert "\n" not in message and "cannot reach" in message and "bigtable://" in message
    check_store_for_runner("bigtable://p/i", ["--runner=DataflowRunner"])
    check_store_for_runner("sqlite:///tmp/x/store.sqlite", ["--runner=FlinkRunner", "--flink_master=[local]"])
    with pytest.raises(RunnerSetupError):  # a cluster on localhost is still a cluster
        check_store_for_runner("sqlite:///tmp/x/store.sqlite", ["--runner=FlinkRunner", "--flink_master=localhost:8081",
                                                                 "--environment_type=EXTERNAL"])  # fmt: skip


def test_local_runner_is_the_default_and_never_overrides():
    assert with_local_runner([]) == ["--runner=FnApiRunner"]
    assert with_local_runner(["--runner", "PrismRunner"]) == ["--runner", "PrismRunner"]
