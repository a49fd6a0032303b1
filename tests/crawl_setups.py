"""The set-ups the tests crawl and store under: a runner's arguments and a store.

A module's crawl fixture is parametrised by set-up names such as ``embedded`` (the SQLite
store, in-process runner) or ``flink-bigtable`` (the Bigtable emulator, Flink's local
mini-cluster): the part before the dash picks the runner (:data:`RUNNERS`, in-process when
it names none), a name ending in ``bigtable`` the emulator.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from beamcrawl.cli import store_admin
from beamcrawl.stores.emulator import scratch_store

# Flink's local mini-cluster, its SDK workers in the launcher (LOOPBACK); no --flink_version:
# the crawl picks the job server (see pipelines/runners.py).
FLINK = ["--runner", "FlinkRunner", "--flink_master=[local]", "--environment_type=LOOPBACK"]
RUNNERS = {
    "prism": ["--runner", "PrismRunner"],
    "flink": FLINK,
    "threads": ["--runner", "FnApiRunner", "--direct_num_workers=4", "--direct_running_mode=multi_threading"],
}
IN_PROCESS = ["--runner", "FnApiRunner"]


def runner_args(setup: str) -> list[str]:
    """The crawl's runner arguments for a set-up name."""
    return RUNNERS.get(setup.split("-")[0], IN_PROCESS)


@contextlib.contextmanager
def crawl_store(request: pytest.FixtureRequest, setup: str, out: Path) -> Iterator[str]:
    """The store URI a set-up crawls into: an initialised scratch store on the session's
    emulator (removed afterwards), or an embedded store in ``out``."""
    if not setup.endswith("bigtable"):
        yield f"sqlite:///{out}/store.sqlite"
        return
    request.getfixturevalue("bigtable_emulator")
    with scratch_store(init=False) as store:
        assert store_admin.main(["init", "--store", store]) == 0
        yield store
