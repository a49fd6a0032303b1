"""Shared fixtures for the simweb tests: one running server per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from beamcrawl.simweb.testing import SimwebHandle, running_simweb

HOSTS = 40
PAGES = 30


@pytest.fixture(scope="session")
def simweb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimwebHandle]:
    """A simweb of 40 hosts x 30 pages, seed 1, with its truth file."""
    with running_simweb(tmp_path_factory.mktemp("simweb"), hosts=HOSTS, pages_per_host=PAGES) as sw:
        yield sw
