"""Fixtures shared by the pipeline tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from beamcrawl.pipelines import store_admin
from beamcrawl.stores.emulator import scratch_store


@pytest.fixture(params=["embedded", "bigtable"])
def both_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URI, once per backend: the embedded store under ``tmp_path/out``, then
    a scratch instance of the Bigtable emulator with its tables made by ``store init``."""
    if request.param == "embedded":
        yield f"sqlite:///{tmp_path}/out/store.sqlite"
        return
    request.getfixturevalue("bigtable_emulator")
    with scratch_store(init=False) as uri:
        assert store_admin.main(["init", "--store", uri]) == 0
        yield uri
