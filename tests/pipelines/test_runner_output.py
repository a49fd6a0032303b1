"""The worker's exception taken out of a job's error text, and a portable runner's output kept
off the console (pipelines/runner_output.py)."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
import traceback
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from beamcrawl.pipelines.crawl_log import CrawlLog
from beamcrawl.pipelines.runner_output import (
    LAUNCHER_THREADS,
    RunnerOutput,
    is_portable,
    kept_off_console,
    worker_exception,
)

STEP = "Crawl round/Record URL state/Finished frontier keys/ParDo(_GuardedPagesFn)"
# How the job services wrap the worker's traceback (Flink's job server, Prism), as the
# portable runner's RuntimeError says it.
WRAPPERS = [
    ("Pipeline BeamApp-x failed in state FAILED: java.lang.RuntimeException: Error received from "
     "SDK harness for instruction 7: ", ""),
    ("Pipeline job-001 failed in state FAILED: bundle inst022 stage-033 failed:", ""),
    ("bundle inst022 stage-033 failed:", "\n)"),
    ("", ""),
]  # fmt: skip

NAME_CHARS = "abcxyzABCXYZ_éßøΔλжЯ"
names = st.builds(
    lambda head, tail: head + tail,
    st.sampled_from("abcxyzABCXYZ_éΔжЯ"),
    st.text(st.sampled_from(NAME_CHARS + "0123456789"), max_size=12),
).filter(lambda n: n != "RuntimeError")
modules = st.one_of(st.just("builtins"), st.lists(names, min_size=1, max_size=3).map(".".join))
# Messages: several lines, any text (non-ASCII, control characters, blank lines).
messages = st.lists(st.text(max_size=40), max_size=4).map("\n".join)


def _plain_message(message: str) -> bool:
    """A message that cannot be read as the start of another traceback or a step's annotation."""
    return not any(line.rstrip().endswith("Traceback (most recent call last):") for line in message.split("\n")) and (
        " [while running " not in message
    )


def _exception_type(module: str, name: str) -> type[Exception]:
    kind = type(name, (Exception,), {})
    kind.__module__ = module
    return kind


def _raise_chain(links: list[tuple[type[Exception], str, str]]) -> BaseException:
    """Raises each exception of ``links`` while handling the one before it ("context"), or
    from it ("cause"), or from None; returns the last one, raised."""

    def level(n: int) -> None:
        kind, message, how = links[n]
        if n == 0:
            raise kind(message)
        try:
            level(n - 1)
        except Exception as inner:
            if how == "cause":
                raise kind(message) from inner
            if how == "none":
                raise kind(message) from None
            raise kind(message)  # noqa: B904 (chained implicitly: "During handling ...")

    try:
        level(len(links) - 1)
    except Exception as exc:
        return exc
    raise AssertionError("nothing raised")


def _first_line(message: str) -> str:
    lines = message.splitlines()
    return lines[0].strip() if lines else ""


def _expected(kind: type[BaseException], message: str) -> str:
    first = _first_line(message)
    return f"{kind.__name__}: {first}" if first else kind.__name__


def _beam_reraise(exc: BaseException, fallback: bool) -> BaseException:
    """What Beam's DoFnRunner raises for ``exc`` in a step: the same type with the step in
    its message, or, where the type cannot be rebuilt so, a RuntimeError quoting it."""
    annotation = f" [while running '{STEP}']"
    try:
        try:
            raise exc
        except Exception as original:
            if fallback:
                quoted = traceback.format_exception_only(type(original), original)[-1].strip()
                raise RuntimeError(quoted + annotation)  # noqa: B904
            raise type(original)(original.args[0] + annotation)  # noqa: B904
    except Exception as augmented:
        return augmented


chains = st.lists(
    st.tuples(modules, names, messages, st.sampled_from(["context", "cause", "none"])), min_size=1, max_size=4
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chain=chains, wrapper=st.sampled_from(WRAPPERS), beam=st.sampled_from(["none", "annotated", "fallback"]))
def test_the_worker_exception_is_the_last_one_raised(chain, wrapper, beam):
    assume(all(_plain_message(message) for _, _, message, _ in chain))
    links = [(_exception_type(module, name), message, how) for module, name, message, how in chain]
    raised = _raise_chain(links)
    worker_kind, worker_message = links[-1][0], links[-1][1]
    if beam != "none":
        raised = _beam_reraise(raised, fallback=beam == "fallback")
    prefix, suffix = wrapper
    text = prefix + "".join(traceback.format_exception(raised)) + suffix
    assert worker_exception(text) == _expected(worker_kind, worker_message), text


@given(message=messages, note=st.text(max_size=30))
def test_notes_and_multi_line_messages_give_the_first_line(message, note):
    assume(_plain_message(message) and _plain_message(note))
    kind = _exception_type("beamcrawl.core.runtime.faults", "InjectedInfrastructureFault")
    exc = _raise_chain([(kind, message, "context")])
    exc.add_note(note)
    text = "".join(traceback.format_exception(exc))
    assert worker_exception(text) == _expected(kind, message)


@given(text=st.text(max_size=200))
def test_text_without_a_traceback_names_nothing(text):
    assume("Traceback (most recent call last):" not in text)
    assert worker_exception(text) is None


def test_the_flink_job_error_names_the_injected_fault():
    # The text Flink's job server returned for a round whose record stage failed (trimmed).
    text = (
        "Pipeline BeamApp-root-1202040418 failed in state FAILED: java.lang.RuntimeException: Error received "
        "from SDK harness for instruction 7: Traceback (most recent call last):\n"
        '  File "apache_beam/runners/common.py", line 1512, in apache_beam.runners.common.DoFnRunner.process\n'
        '  File "/work/beamcrawl/core/runtime/faults.py", line 90, in fail_element\n'
        '    raise kind(f"injected fault in {stage} for {text!r}")\n'
        "beamcrawl.core.runtime.faults.InjectedInfrastructureFault: injected fault in record for 'http'\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/work/.venv/lib/python3.11/site-packages/apache_beam/runners/worker/sdk_worker.py", line 310, in _execute\n'
        "    response = task()\n"
        "               ^^^^^^\n"
        "beamcrawl.core.runtime.faults.InjectedInfrastructureFault: injected fault in record for 'http' "
        f"[while running '{STEP}']\n"
    )  # fmt: skip
    assert worker_exception(text) == "InjectedInfrastructureFault: injected fault in record for 'http'"


@pytest.mark.parametrize(
    ("args", "portable"),
    [
        (["--runner", "FlinkRunner"], True),
        (["--runner=PrismRunner"], True),
        (["--runner=PortableRunner", "--job_endpoint=localhost:8099"], True),
        (["--runner", "FnApiRunner"], False),
        (["--runner=DirectRunner"], False),
        ([], False),
    ],
)
def test_is_portable(args, portable):
    assert is_portable(args) is portable


# --- the console and the log ---------------------------------------------------------------


@contextlib.contextmanager
def _console() -> Iterator[io.StringIO]:
    """The console: ``sys.stderr`` and a root handler writing to it, as the CLI sets them up
    (inside the test: pytest puts its own ``sys.stderr`` in place after the fixtures)."""
    stream = io.StringIO()
    saved = sys.stderr
    sys.stderr = stream
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        sys.stderr = saved


def _on_thread(name: str, work) -> None:
    thread = threading.Thread(target=work, name=name)
    thread.start()
    thread.join()


def test_the_runners_threads_write_to_the_log_and_the_launchers_to_the_console(tmp_path):
    with _console() as console:
        with CrawlLog(str(tmp_path)) as record, kept_off_console(["--runner", "FlinkRunner"], record) as output:
            assert output is not None and output.path == record.path
            print("round 1: running", file=sys.stderr)
            logging.getLogger("beamcrawl.pipelines.crawl").info("a launcher line")
            _on_thread(LAUNCHER_THREADS[0], lambda: print("round 1 [fetch] progress", file=sys.stderr))

            def worker() -> None:
                print("Traceback (most recent call last):\nInjectedInfrastructureFault: x", file=sys.stderr)
                logging.getLogger("apache_beam.runners.worker.sdk_worker").error("Error processing instruction 7")
                logging.getLogger("beamcrawl.transforms.fetch").warning("a worker's line")

            _on_thread("run_worker_1-1", worker)
            logging.getLogger().error("java.lang.RuntimeException: the job's error")  # the runner's relay
            logging.getLogger("PrismRunner").error("Bundle Failed.")
            output.note("round 1 failed: RuntimeError", "the whole text")
        assert sys.stderr is console  # put back
        logging.getLogger("apache_beam.runners.worker.sdk_worker").error("after the crawl")
        shown = console.getvalue()
    with open(record.path, encoding="utf-8") as fh:
        kept = fh.read()
    assert "round 1: running" in shown and "a launcher line" in shown and "progress" in shown
    for line in ("Traceback", "Error processing", "a worker's line", "the job's error", "Bundle Failed", "whole"):
        assert line not in shown
        assert line in kept
    assert "after the crawl" in shown  # the console's handler is as it was


def test_nothing_changes_in_process(tmp_path):
    with _console() as console:
        with CrawlLog(str(tmp_path)) as record, kept_off_console(["--runner", "FnApiRunner"], record) as output:
            assert output is None
            assert sys.stderr is console
            _on_thread("run_worker_1-1", lambda: print("a worker's line", file=sys.stderr))
        assert "a worker's line" in console.getvalue()


def test_without_a_crawl_log_a_temporary_file_keeps_the_output():
    record = CrawlLog("gs://bucket/out")  # an object store: no log file of its own
    with _console() as console, record, RunnerOutput(record) as output:
        assert output.path is not None
        _on_thread("run_worker_1-1", lambda: print("a worker's traceback", file=sys.stderr))
        logging.getLogger("apache_beam.runners.worker.sdk_worker").error("Error processing instruction 7")
    try:
        with open(output.path, encoding="utf-8") as fh:
            kept = fh.read()
        assert "a worker's traceback" in kept and "Error processing" in kept
        assert "a worker's traceback" not in console.getvalue()
    finally:
        os.unlink(output.path)


def test_the_runners_threads_still_running_after_the_crawl_keep_writing_to_the_log(tmp_path):
    go_on = threading.Event()

    def worker() -> None:  # a LOOPBACK worker torn down only at the process's exit
        go_on.wait(10)
        print("a teardown's traceback", file=sys.stderr)
        logging.getLogger("apache_beam.runners.common").error("cannot schedule new futures after shutdown")

    with _console() as console:
        with CrawlLog(str(tmp_path)) as record, kept_off_console(["--runner", "PrismRunner"], record) as output:
            thread = threading.Thread(target=worker, name="run_worker_1-1")
            thread.start()
        try:
            assert output.lingering() == [thread]
            print("beamcrawl crawl: error: round 1 failed ...", file=sys.stderr)  # the main thread's line
            logging.getLogger("apache_beam.utils.subprocess_server").warning("Really destroying service")
            go_on.set()
            thread.join()
        finally:
            output.close()
        shown = console.getvalue()
        assert sys.stderr is console
    with open(record.path, encoding="utf-8") as fh:
        kept = fh.read()
    assert "round 1 failed" in shown
    for line in ("a teardown's traceback", "cannot schedule", "Really destroying"):
        assert line not in shown
        assert line in kept
