"""The fetch stage's plumbing: what leaves it for the rest of the round (the fetching itself
is tested in tests/core/test_fetcher.py and end to end)."""

from __future__ import annotations

from typing import Any, Iterator

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamcrawl.core.net.backlog import Backlog
from beamcrawl.core.net.fetcher import DEFERRED_REASONS, deferred_reason
from beamcrawl.core.runtime.faults import ELEMENT_ENV
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

    def __init__(self, results: list[FetchResult], fail: bool = False, deferred: tuple[Any, ...] = ()) -> None:
        self.results = results
        self.fail = fail
        self.deferred = deferred  # (entries, why) batches, as the loop emits them
        self.closed = False
        self.backlog = Backlog(1)
        self.asked_batches: list[bool] = []

    def drain(self, wait: bool, deferred_batches: bool = False) -> Iterator[tuple[str, Any]]:
        self.asked_batches.append(deferred_batches)
        for entries, why in self.deferred:
            if deferred_batches:
                yield "deferred", (entries, why)
            else:
                for entry in entries:
                    yield "result", FetchResult(entry=entry, outcome="deferred", url=entry.url, error=why)
        for result in self.results:
            yield "result", result
        if self.fail:
            raise RuntimeError("the loop broke")

    def levels(self) -> tuple[int, int, int, int]:
        return (0, 0, 0, 0)

    def close(self) -> None:
        self.closed = True


class _Counter:
    def __init__(self) -> None:
        self.value = 0

    def inc(self, n: int = 1) -> None:
        self.value += n


def _finished_bundle(
    monkeypatch: Any, runner: _ClosingRunner, counters: dict[str, _Counter] | None = None
) -> tuple[list[Any], list[bool], bool]:
    """Runs a fetch bundle's end over ``runner``; what it emitted, for each trim of the heap
    whether the loop was already closed then, and whether the bundle's end raised.
    ``counters`` gets the stage's received and deferred counters and its deferral reasons'."""
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
    if counters is not None:
        assert fn.metrics is not None
        for name in ("received", "deferred"):
            counters[name] = _Counter()
            setattr(fn.metrics, name, counters[name])
        for kind in fn.metrics.deferred_reasons:
            counters[kind] = fn.metrics.deferred_reasons[kind] = _Counter()  # type: ignore[assignment]
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


def _entries(n: int, host: str) -> list[FrontierEntry]:
    return [FrontierEntry(url=f"http://{host}/p{i}", fp=i + 1, host=host, due_ms=0) for i in range(n)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=40), max_size=6),
    reasons=st.lists(
        st.sampled_from(["round window ended", "internal error: boom", "fenced: lease lost", "dns: timeout"]),
        min_size=6,
    ),
    fetched=st.integers(min_value=0, max_value=3),
)
def test_deferred_entries_are_counted_as_their_batches_and_never_emitted(monkeypatch, sizes, reasons, fetched):
    """However a window's end and a host's trouble split the deferrals into batches, the
    stage counts every deferred URL once, under its reason, and emits none of them: only
    what the round processes leaves it."""
    batches = tuple((_entries(n, f"h{i}.test"), reasons[i]) for i, n in enumerate(sizes))
    results = [_result(i, "fetched") for i in range(fetched)]
    runner = _ClosingRunner(results, deferred=batches)
    counters: dict[str, _Counter] = {}
    out, _trims, raised = _finished_bundle(monkeypatch, runner, counters)
    assert not raised and runner.asked_batches == [True]
    assert [o.value.url for o in out] == [r.url for r in results]
    assert counters["deferred"].value == sum(sizes)
    assert counters["received"].value == sum(sizes) + fetched
    for kind in DEFERRED_REASONS:
        expected = sum(n for n, why in zip(sizes, reasons) if deferred_reason(why) == kind)
        assert counters[kind].value == expected


def test_with_faults_injected_each_deferred_entry_is_a_result_that_meets_them(monkeypatch):
    """A test's injected fault is checked element by element: the stage then takes each
    deferred entry as a result (dropped after it, as ever) so one can meet it."""
    monkeypatch.setenv(ELEMENT_ENV, "fetch:h0.test/p1$")
    runner = _ClosingRunner([], deferred=((_entries(3, "h0.test"), "round window ended"),))
    counters: dict[str, _Counter] = {}
    out, _trims, raised = _finished_bundle(monkeypatch, runner, counters)
    assert not raised and runner.asked_batches == [False]
    outcomes = sorted(getattr(o.value, "outcome", "dead letter") for o in out)
    assert outcomes == ["dead letter", "deferred", "deferred"]
    assert counters["deferred"].value == 2 and counters["window_ended"].value == 2


def test_a_robots_refusal_past_the_checks_bound_is_counted_apart():
    from beamcrawl.core.net.fetcher import ROBOTS_CAPPED
    from beamcrawl.transforms import fetch

    metrics = fetch._MetricsCollector()
    metrics.robots_disallowed, metrics.robots_capped = _Counter(), _Counter()  # type: ignore[assignment]
    capped = _result(1, "robots_disallowed")
    capped.error = ROBOTS_CAPPED
    for result in (_result(0, "robots_disallowed"), capped, _result(2, "fetched")):
        metrics.count(result)
    assert metrics.robots_disallowed.value == 2  # type: ignore[attr-defined]
    assert metrics.robots_capped.value == 1  # type: ignore[attr-defined]
