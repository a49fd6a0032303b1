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

from beamcrawl.stores.base import Store, open_store
from beamcrawl.stores.embedded import EmbeddedStore

StoreFactory = Callable[[pytest.FixtureRequest, Path], Store]


def _embedded(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return EmbeddedStore.from_uri(str(tmp_path / "store"))


def _bigtable(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    # The emulator runs once per session (tests/conftest.py); each test gets its own
    # table prefix, created here and dropped when the test ends.
    return open_store(request.getfixturevalue("bigtable_uri"))


STORE_FACTORIES: dict[str, StoreFactory] = {
    "embedded": _embedded,
    "bigtable": _bigtable,
}


@pytest.fixture(params=list(STORE_FACTORIES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty store of each backend in turn."""
    s = STORE_FACTORIES[request.param](request, tmp_path)
    try:
        yield s
    finally:
        s.close()
