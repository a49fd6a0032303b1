"""Live progress of a running round: polls the job's Beam metrics about once a second.

How each runner answers a poll while the job runs:

- Prism, Flink (portable runners): ``p.run()`` returns at once; the job service's
  ``GetJobMetrics`` gives the attempted counters of running bundles. (The result's own
  ``metrics()`` caches its first answer, so a poll asks the job service afresh and never
  touches that cache, which the round report reads after the job.)
- Dataflow: ``p.run()`` returns at once; ``result.metrics()`` asks the service each time
  (until the job has ended), here every 5 s rather than every second.
- FnApiRunner (the local default): ``p.run()`` returns only when the job is done, and the
  runner keeps finished bundles' metrics to itself until then. :class:`LiveFnApiRunner`
  publishes them as each bundle ends, plus the running bundles' attempted counters: with
  worker processes or threads (gRPC workers) from the runner's own progress requests to the
  workers; in one process by asking the bundle processors directly, as a worker's progress
  handler does.

The display (:class:`ProgressDisplay`) is a tqdm bar on a terminal and one plain line every
10 s otherwise (logs, CI). ``BEAMCRAWL_PROGRESS=off|plain|bar`` overrides the choice and
``BEAMCRAWL_PROGRESS_EVERY`` the plain line's interval.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
import time
from typing import Any, Callable, Iterable, TextIO

import apache_beam as beam
from apache_beam.metrics.monitoring_infos import consolidate
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import fn_runner

from beamcrawl.pipelines import sdk_worker
from beamcrawl.pipelines.progress import Progress, describe, format_line, responses

log = logging.getLogger(__name__)

POLL_EVERY = 1.0
DATAFLOW_POLL_EVERY = 5.0
PLAIN_EVERY = 10.0

MetricsMap = dict[str, Any]
# Told every poll's fields besides the display: (round, fields, time, final). The crawl's log
# and its live status file (pipelines/crawl_log.py, pipelines/live_status.py) are two.
Sink = Callable[[int, dict[str, Any], float, bool], None]


# --- metrics of a running job -----------------------------------------------------------


def flatten(results: dict[str, list[Any]], final: bool = False) -> MetricsMap:
    """User counters of a ``metrics().query()`` answer as ``{"namespace/name": value}``,
    preferring attempted values (what a running job has done so far), or with ``final``
    committed ones (a finished job's own figures: Prism's attempted values may stop at the
    last progress report before the end)."""
    out: MetricsMap = {}
    for counter in results.get("counters", []):
        name = counter.key.metric.name
        if name.startswith(("metric:", "beam:")):  # a runner's own system metrics (Prism)
            continue
        first, second = (counter.committed, counter.attempted) if final else (counter.attempted, counter.committed)
        value = first if first is not None else second
        if isinstance(value, (int, float)):
            key = f"{counter.key.metric.namespace}/{name}"
            out[key] = out.get(key, 0) + value
    return out


class _LiveMetrics:
    """Monitoring infos of a FnApiRunner job: finished bundles plus the running ones."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.finished: list[Any] = []
        self.running: dict[str, list[Any]] = {}  # instruction id -> latest progress infos
        self.over: set[str] = set()
        self.embedded: list[Any] = []  # in-process worker handlers with a bundle running

    def progress(self, instruction_id: str, infos: Iterable[Any]) -> None:
        with self.lock:
            if instruction_id not in self.over:
                self.running[instruction_id] = list(infos)

    def bundle_over(self, instruction_id: str) -> None:
        # Its last progress answer stays counted until the runner hands over the final
        # figures (bundle_done), so the display never steps back in between.
        with self.lock:
            self.over.add(instruction_id)

    def bundle_done(self, infos: Iterable[Any]) -> None:
        with self.lock:
            self.finished = list(consolidate([*self.finished, *infos]))
            self.running = {k: v for k, v in self.running.items() if k not in self.over}

    def snapshot(self) -> MetricsMap:
        with self.lock:
            infos = [*self.finished, *(i for infos in self.running.values() for i in infos)]
            handlers = list(self.embedded)
        for handler in handlers:  # one process: ask the running bundle processors
            cache = getattr(handler, "bundle_processor_cache", None)
            for _desc, processor in list(getattr(cache, "active_bundle_processors", {}).values()):
                try:
                    infos.extend(processor.monitoring_infos())
                except Exception:  # the bundle ended meanwhile
                    pass
        return flatten(fn_runner.FnApiMetrics({"live": list(consolidate(infos))}).query())


class LocalFnApiRunner(fn_runner.FnApiRunner):
    """The local FnApiRunner, whose ``multi_processing`` workers start without the client
    libraries no stage uses (:mod:`beamcrawl.pipelines.sdk_worker`)."""

    def run_pipeline(self, pipeline: Any, options: PipelineOptions) -> Any:
        with sdk_worker.local_workers():
            return super().run_pipeline(pipeline, options)


class LiveFnApiRunner(LocalFnApiRunner):
    """The local FnApiRunner, with its metrics readable while the job runs."""

    def __init__(self) -> None:
        super().__init__(progress_request_frequency=POLL_EVERY)
        self.live = _LiveMetrics()
        # The job as this runner ran it: the ids its metrics name (job_metrics.py reads it
        # instead of translating the whole pipeline a second time, ~0.6 s a round).
        self.pipeline_proto: Any = None

    def run_via_runner_api(self, pipeline_proto: Any, options: PipelineOptions) -> Any:
        self.pipeline_proto = pipeline_proto  # the runner works on a deep copy (create_stages)
        return super().run_via_runner_api(pipeline_proto, options)

    def run_pipeline(self, pipeline: Any, options: PipelineOptions) -> Any:
        live = self.live
        original = fn_runner.ProgressRequester

        class _Requester(original):  # type: ignore[misc, valid-type]
            """Beam's progress requester, keeping each progress answer for the poller."""

            def __init__(self, worker_handler: Any, instruction_id: str, frequency: Any, callback: Any = None) -> None:
                super().__init__(
                    worker_handler, instruction_id, frequency,
                    callback=lambda p: live.progress(instruction_id, p.monitoring_infos),
                )  # fmt: skip
                self._iid = instruction_id

            def stop(self) -> None:
                super().stop()
                live.bundle_over(self._iid)

        fn_runner.ProgressRequester = _Requester
        try:
            return super().run_pipeline(pipeline, options)
        finally:
            fn_runner.ProgressRequester = original

    def _execute_bundle(self, runner_execution_context: Any, bundle_context_manager: Any, bundle_input: Any) -> Any:
        handlers = [h for h in bundle_context_manager.worker_handlers if hasattr(h, "bundle_processor_cache")]
        with self.live.lock:
            self.live.embedded.extend(handlers)
        try:
            result = super()._execute_bundle(runner_execution_context, bundle_context_manager, bundle_input)
        finally:
            with self.live.lock:
                for h in handlers:
                    self.live.embedded.remove(h)
        self.live.bundle_done(result.process_bundle.monitoring_infos)
        return result


def pipeline(options: PipelineOptions) -> beam.Pipeline:
    """A pipeline on the chosen runner; the local default (no runner named, or FnApiRunner)
    becomes :class:`LiveFnApiRunner`, or with progress off :class:`LocalFnApiRunner`."""
    runner = options.view_as(StandardOptions).runner
    if runner in (None, "FnApiRunner"):
        return beam.Pipeline(runner=LiveFnApiRunner() if _mode() != "off" else LocalFnApiRunner(), options=options)
    return beam.Pipeline(options=options)


def _job_metrics(result: Any) -> MetricsMap:
    """A fresh poll of a launched job's metrics (never the result's cached answer)."""
    service, job_id = getattr(result, "_job_service", None), getattr(result, "_job_id", None)
    if service is not None and job_id is not None:  # a portable runner: Prism, Flink
        from apache_beam.portability.api import beam_job_api_pb2
        from apache_beam.runners.portability.portable_runner import PortableMetrics

        answer = service.GetJobMetrics(beam_job_api_pb2.GetJobMetricsRequest(job_id=job_id))
        return flatten(PortableMetrics(answer).query())
    return flatten(result.metrics().query())


# --- display -----------------------------------------------------------------------------


def _mode(stream: TextIO | None = None) -> str:
    mode = os.environ.get("BEAMCRAWL_PROGRESS", "auto").strip().lower()
    if mode in ("off", "plain", "bar"):
        return mode
    stream = stream or sys.stderr
    if not getattr(stream, "isatty", lambda: False)():
        return "plain"
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        columns = 0
    # A terminal that reports no width (some containers' ttys) cannot place a bar: plain lines.
    return "bar" if columns > 0 else "plain"


class ProgressDisplay:
    """Shows :class:`Progress` as a tqdm bar (a terminal) or plain lines (anything else)."""

    def __init__(
        self,
        round_no: int,
        progress: Progress,
        stream: TextIO | None = None,
        mode: str | None = None,
        sinks: Iterable[Sink] = (),
    ) -> None:
        self.round_no = round_no
        self.progress = progress
        self.sinks = list(sinks)
        self.stream = stream or sys.stderr
        self.mode = mode or _mode(self.stream)
        self.bar: Any = None
        self.status: Any = None
        self.next_line = time.time() + float(os.environ.get("BEAMCRAWL_PROGRESS_EVERY", PLAIN_EVERY))

    def show(self, now: float, final: bool = False) -> None:
        fields = self.progress.fields(now, final)
        if final:
            self.progress.finished_at = now
        for sink in self.sinks:
            try:
                sink(self.round_no, fields, now, final)
            except OSError as exc:  # a full disk must not stop the round: say so, go on
                log.warning("live progress: %s", exc)
        if self.mode == "bar":
            self._bar(fields, final)
        elif self.mode == "plain" and (final or now >= self.next_line):
            self.next_line = now + float(os.environ.get("BEAMCRAWL_PROGRESS_EVERY", PLAIN_EVERY))
            print(format_line(self.round_no, fields), file=self.stream, flush=True)

    def _bar(self, fields: dict[str, Any], final: bool) -> None:
        """Two lines: the bar of settled fetches, and under it the rest of the fields."""
        from tqdm import tqdm

        if self.bar is None:
            width: dict[str, Any] = {"dynamic_ncols": True}
            self.bar = tqdm(
                total=max(1, int(fields["planned"])), file=self.stream, position=0, **width,
                bar_format="{desc} {percentage:3.0f}%|{bar:24}| {n_fmt}/{total_fmt} settled [{elapsed}]{postfix}",
            )  # fmt: skip
            self.status = tqdm(total=0, file=self.stream, position=1, bar_format="{desc}", **width)
        bar = self.bar
        bar.total = max(1, int(fields["planned"]), int(fields["settled"]))
        bar.n = int(fields["settled"])
        bar.set_description_str(f"round {self.round_no} {fields['stage']:<12}", refresh=False)
        bar.set_postfix_str(responses(fields), refresh=False)
        self.status.set_description_str("  " + describe(fields), refresh=False)
        bar.refresh()
        self.status.refresh()
        if final:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.status.close()
            self.bar = None


class ProgressPoller:
    """Polls a running job's metrics on a daemon thread and shows them.

    ``source`` is set before the job starts (FnApiRunner: its live metrics) or attached
    once ``p.run()`` has returned (every other runner: the launched job's result).
    """

    def __init__(
        self,
        display: ProgressDisplay,
        source: Callable[[], MetricsMap] | None = None,
        every: float = POLL_EVERY,
        side: Callable[[], MetricsMap] | None = None,
    ) -> None:
        self.display = display
        self.source = source
        # Counts the round's workers keep beside the runner's metrics (the store's progress
        # rows, state/fence.py): each poll takes the larger of the two, so a runner that
        # reports nothing until the job ends (Flink with external SDK workers) still moves.
        self.side = side
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="beamcrawl-progress", daemon=True)
        self.polls = 0
        self.failures = 0
        self.cpu_seconds = 0.0  # the polling thread's own CPU time (its overhead on the launcher)

    def attach(self, result: Any) -> None:
        if self.source is None:
            self.source = lambda: _job_metrics(result)

    def finished(self, result: Any) -> None:
        """The job is done: the last line shows its final metrics, not a poll that a bundle's
        last counts may not have reached yet."""
        self.final_source = lambda: flatten(result.metrics().query(), final=True)

    def _poll(self, final: bool = False) -> None:
        source = (getattr(self, "final_source", None) or self.source) if final else self.source
        if source is not None:
            try:
                metrics = source()
            except Exception as exc:  # a runner without live metrics: say so once, keep going
                self.failures += 1
                if self.failures == 1:
                    log.warning("live progress: cannot read the job's metrics (%s)", exc)
                return
            if self.side is not None and not final:
                try:
                    side = self.side()
                except Exception as exc:
                    log.debug("live progress: cannot read the workers' progress rows (%s)", exc)
                    side = {}
                metrics = dict(metrics)
                for name, value in side.items():
                    current = metrics.get(name, 0)
                    if not isinstance(current, (int, float)) or value > current:
                        metrics[name] = value
            self.polls += 1
            self.display.progress.update(metrics, time.time())
        self.display.show(time.time(), final=final)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            began = time.thread_time()
            self._poll()
            self.cpu_seconds += time.thread_time() - began

    def __enter__(self) -> "ProgressPoller":
        self._thread.start()
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if exc_type is None:
            self._poll(final=True)
        else:
            self.display.close()
        log.debug("live progress: %d polls, %.3f s of CPU on the polling thread", self.polls, self.cpu_seconds)


def run(
    p: beam.Pipeline,
    round_no: int,
    window: float,
    stream: TextIO | None = None,
    *,
    progress: Progress | None = None,
    sinks: Iterable[Sink] = (),
    side: Callable[[], MetricsMap] | None = None,
) -> Any:
    """Runs ``p`` to the end, showing live progress meanwhile; returns its result.

    The job runs on the calling thread (a Ctrl-C reaches it as usual); only the polling
    runs on a daemon thread. ``progress`` (made here if not given) has ``finished_at`` set
    when the job is done; ``sinks`` are told every poll's fields too; ``side`` gives counts the
    workers keep outside the runner's metrics (merged into each poll, see ProgressPoller).
    """
    progress = progress or Progress(window=window, started=time.time())
    mode = _mode(stream)
    if mode == "off":
        result = p.run()
        result.wait_until_finish()
        progress.finished_at = time.time()
        return result
    runner = p.runner
    source = runner.live.snapshot if isinstance(runner, LiveFnApiRunner) else None
    display = ProgressDisplay(round_no, progress, stream, mode, sinks)
    # A managed service's metrics API has request quotas: ask it less often.
    every = DATAFLOW_POLL_EVERY if "dataflow" in type(runner).__name__.lower() else POLL_EVERY
    with contextlib.ExitStack() as stack:
        if mode == "bar":  # log lines are written above the bar, which is then redrawn
            from tqdm.contrib.logging import logging_redirect_tqdm

            stack.enter_context(logging_redirect_tqdm())
        poller = stack.enter_context(ProgressPoller(display, source, every, side))
        result = p.run()
        poller.attach(result)
        result.wait_until_finish()
        poller.finished(result)
    return result
