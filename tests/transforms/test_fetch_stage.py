"""The fetch stage's plumbing: what leaves it for the rest of the round (the fetching itself
is tested in tests/core/test_fetcher.py and end to end)."""

from __future__ import annotations

from typing import Any, Iterator

from beamcrawl.core.net.backlog import Backlog
from beamcrawl.schemas.records import FetchResult, FrontierEntry
from beamcrawl.transforms.fetch import needs_processing


def _result(i: int, outcome: str) -> FetchResult:
    url = f"http://h{i % 5}.test/p{i}"
    entry = FrontierEntry(url=url, fp=i + 1, host=f"h{i % 5}.test", due_ms=0)
    return FetchResult(
        entry=entry,
        outcome=outcome,
        url=url,
        status=200 if outcome == "fetched" else 0,
        body=b"<html>%d</html>" % i,
        raw_body=b"<html>%d</html>" % i,
    )


OUTCOMES = ("fetched", "error", "robots_disallowed", "deferred")


def test_only_deferred_results_are_left_out():
    assert [needs_processing(_result(0, o)) for o in OUTCOMES] == [True, True, True, False]


class _ClosingRunner:
    """A fetch loop's stand-in: hands out its results, then records that it was closed."""

    def __init__(self, results: list[FetchResult], fail: bool = False) -> None:
        self.results = results
        self.fail = fail
        self.closed = False
        self.backlog = Backlog(1)

    def drain(self, wait: bool) -> Iterator[tuple[str, Any]]:
        for result in self.results:
            yield "result", result
        if self.fail:
            raise RuntimeError("the loop broke")

    def levels(self) -> tuple[int, int, int, int]:
        return (0, 0, 0, 0)

    def close(self) -> None:
        self.closed = True


def _finished_bundle(monkeypatch: Any, runner: _ClosingRunner) -> tuple[list[Any], list[bool], bool]:
    """Runs a fetch bundle's end over ``runner``; what it emitted, for each trim of the heap
    whether the loop was already closed then, and whether the bundle's end raised."""
    from beamcrawl.core.runtime import heap
    from beamcrawl.core.runtime.config import CrawlConfig
    from beamcrawl.transforms import fetch

    trims: list[bool] = []

    def release() -> bool:
        trims.append(runner.closed)
        return True

    monkeypatch.setattr(heap, "release", release)
    fn = fetch._FetchShardsFn(CrawlConfig(out="unused", store="unused"))
    monkeypatch.setattr(fn.fence, "publish", lambda *a: None)
    fn.setup()
    fn.start_bundle()
    fn.runner = runner  # type: ignore[assignment]
    out: list[Any] = []
    raised = False
    try:
        for value in fn.finish_bundle():
            out.append(value)
    except RuntimeError:
        raised = True
    return out, trims, raised


def test_the_heap_is_trimmed_once_when_the_loop_has_closed(monkeypatch):
    results = [_result(i, "fetched") for i in range(3)]
    out, trims, raised = _finished_bundle(monkeypatch, _ClosingRunner(results))
    assert [o.value.url for o in out] == [r.url for r in results] and not raised
    assert trims == [True]  # once, after the loop's thread was gone


def test_the_heap_is_trimmed_when_draining_the_loop_raised(monkeypatch):
    out, trims, raised = _finished_bundle(monkeypatch, _ClosingRunner([_result(0, "fetched")], fail=True))
    assert len(out) == 1 and raised  # the failure still reaches the runner
    assert trims == [True]
