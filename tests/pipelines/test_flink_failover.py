"""The failover watch's pure parts: which job states are a failover, which runs are watched.
(The watch itself runs against a real cluster in tests/pipelines/test_flink_cluster.py.)"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from beamcrawl.pipelines.flink_failover import FAILURE_STATES, failed_over, job_name, rest_address

STATES = sorted(FAILURE_STATES | {"CREATED", "INITIALIZING", "RUNNING", "FINISHED", "RECONCILING"})


@given(st.lists(st.sampled_from(STATES), max_size=30))
def test_each_move_into_a_failure_state_is_one_failover(states):
    previous, count = None, 0
    for state in states:
        count += failed_over(previous, state)
        previous = state
    runs = [s in FAILURE_STATES for s in states]
    assert count == sum(1 for i, failing in enumerate(runs) if failing and (i == 0 or not runs[i - 1]))


def test_only_a_remote_flink_master_is_watched():
    assert rest_address(["--runner=FlinkRunner", "--flink_master=localhost:8081"]) == "localhost:8081"
    assert rest_address(["--runner", "FlinkRunner", "--flink_master", "http://jm:8081/"]) == "jm:8081"
    assert rest_address(["--runner=FlinkRunner", "--flink_master=[local]"]) is None
    assert rest_address(["--runner=FlinkRunner"]) is None
    assert rest_address(["--runner=FnApiRunner", "--flink_master=localhost:8081"]) is None


def test_a_rounds_attempts_get_job_names_of_their_own():
    assert job_name(3, "3:1.5") == job_name(3, "3:1.5")
    assert job_name(3, "3:1.5") != job_name(3, "3:2.5")
    assert job_name(3, "3:1.5").startswith("beamcrawl-round-3-")
