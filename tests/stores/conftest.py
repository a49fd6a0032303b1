"""Fixtures for the store tests: the contract suite runs once per backend.

To add a backend, write a factory ``(request, tmp_path) -> Store`` that returns a fresh,
empty store, add it to ``STORE_FACTORIES`` and add its name to the ``store`` fixture's
``params``. A factory that needs a service (e.g. the Bigtable emulator) can get it with
``request.getfixturevalue(...)`` and call ``pytest.skip`` when it is unavailable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from beamcrawl.stores.base import Store
from beamcrawl.stores.embedded import EmbeddedStore

StoreFactory = Callable[[pytest.FixtureRequest, Path], Store]


def _embedded(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return EmbeddedStore.from_uri(str(tmp_path / "store"))


STORE_FACTORIES: dict[str, StoreFactory] = {
    "embedded": _embedded,
}


@pytest.fixture(params=["embedded"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of each backend in turn."""
    s = STORE_FACTORIES[request.param](request, tmp_path)
    try:
        yield s
    finally:
        s.close()
