"""Fixtures shared by test folders: the Cloud Bigtable emulator, one per test session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from crawl_setups import crawl_store

from beamcrawl.stores.base import Store, open_store
from beamcrawl.stores.embedded import EmbeddedStore
from beamcrawl.stores.emulator import EmulatorUnavailable, RunningEmulator, running_emulator, scratch_store


@pytest.fixture(scope="session")
def bigtable_emulator() -> Iterator[RunningEmulator]:
    """A running emulator; ``BIGTABLE_EMULATOR_HOST`` points at it while the session runs
    (so crawls started as subprocesses use it too).

    Found or built by ``beamcrawl.stores.emulator`` (the Cloud SDK's ``cbtemulator``, else
    a copy built with Go and cached). Without one the tests that need it fail: a skipped
    backend would let the suite pass without testing it. ``BEAMCRAWL_EMULATOR=off`` is the
    one way to leave them out, on purpose.
    """
    import os

    try:
        with running_emulator() as emulator:
            yield emulator
    except EmulatorUnavailable as exc:
        if os.environ.get("BEAMCRAWL_EMULATOR", "").strip().lower() in ("off", "none", "0"):
            pytest.skip(f"Bigtable emulator turned off: {exc}")
        pytest.fail(f"no Bigtable emulator: {exc}")


@pytest.fixture
def bigtable_uri(bigtable_emulator: RunningEmulator) -> Iterator[str]:
    """A fresh, initialised store on the emulator (its own table prefix), for one test."""
    with scratch_store() as uri:
        yield uri


@pytest.fixture(params=["embedded", "bigtable"])
def both_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URI, once per backend: the embedded store under ``tmp_path/out``, then
    a scratch instance of the Bigtable emulator with its tables made by ``store init``."""
    with crawl_store(request, request.param, tmp_path / "out") as uri:
        yield uri


# The store contract suite (tests/stores/) and the state tests (tests/state/) run once per backend.
# To add a backend, write a factory ``(request, tmp_path) -> Store`` that returns a fresh, empty
# store and add it to ``STORE_FACTORIES``; a factory that needs a service gets it with
# ``request.getfixturevalue(...)``.
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


# The modules that take longest (minutes each: a Flink session cluster, rounds on every runner,
# crashes injected at every point, the newcomer's first hour). ``make test`` runs the suite on
# two workers, a module at a time each (pytest -n 2 --dist loadfile --no-loadscope-reorder),
# in the order collected: these go first, so that neither worker starts one of them last.
LONGEST_FIRST = (
    "tests/pipelines/test_flink_cluster.py",
    "tests/pipelines/test_end_to_end.py",
    "tests/pipelines/test_crash_safety.py",
    "tests/cli/test_first_hour_two.py",
)


def _module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """An end-to-end test (whole rounds, a crawl in a subprocess) is a slow one too, so that
    ``pytest -m "not slow"`` leaves it out as well.

    Then the modules are put in the order two workers finish soonest in: the
    :data:`LONGEST_FIRST` ones, the other modules with a slow test, then the rest; a module's
    tests stay together and in their order (its module fixtures are made once)."""
    slow_modules: set[str] = set()
    for item in items:
        if item.get_closest_marker("e2e") is not None:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow") is not None:
            slow_modules.add(_module_of(item))

    def rank(item: pytest.Item) -> int:
        module = _module_of(item)
        if module in LONGEST_FIRST:
            return LONGEST_FIRST.index(module)
        return len(LONGEST_FIRST) + (0 if module in slow_modules else 1)

    items.sort(key=rank)  # stable: within a rank, the collection order


@pytest.fixture
def connect_log(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every address an asyncio socket connects to in this process while the test runs
    (aiohttp's connections are made by ``loop.sock_connect``), and a guard: a connection to
    anything but loopback raises before it is attempted, so a test of a refusal never sends
    traffic elsewhere even if the code under test is broken."""
    import asyncio.selector_events
    import ipaddress

    log: list[tuple[str, int]] = []
    real = asyncio.selector_events.BaseSelectorEventLoop.sock_connect

    async def sock_connect(self, sock, address):  # type: ignore[no-untyped-def]
        host, port = str(address[0]), int(address[1])
        log.append((host, port))
        if not ipaddress.ip_address(host.split("%")[0]).is_loopback:
            raise ConnectionRefusedError(f"test guard: no connection to {host} from a test")
        return await real(self, sock, address)

    monkeypatch.setattr(asyncio.selector_events.BaseSelectorEventLoop, "sock_connect", sock_connect)
    return log
