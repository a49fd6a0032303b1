"""Dead letters: one element's failure is that element's, never the round's (docs/ARCHITECTURE.md §3).

Every stage that handles one URL, page, link, host or stored row catches an exception for
that element, counts it (``errors/<stage>/<exception type>``), and emits a
:class:`DeadLetter` on a tagged output (:data:`ERRORS`) instead of failing its bundle; the
round goes on. The element is not passed on, so nothing downstream records it finished:
its frontier row stays as it was (and the commit keeps the row of any URL with a dead
letter even if another branch of the round finished it). The round writes its dead letters
to ``OUT/errors/round=N/*.parquet`` (transforms/parquet_io.py; schema:
:data:`beamcrawl.schemas.arrow.ERRORS_SCHEMA`), committed with the round's other files;
an element that failed in two rounds is quarantined (state/quarantine.py).

Failures of the infrastructure (the store unreachable, the output filesystem unwritable:
:func:`is_infrastructure`) are re-raised: they fail the round, whose rerun is the retry.

How a stage uses it, the same way everywhere::

    class _SomeFn(beam.DoFn):
        def __init__(self):
            self.dead = Outlet("stage")          # counters made here, like the others
        def process(self, element):
            try:
                self.dead.check(element)          # injected faults (tests); one comparison
                out = work(element)
            except Exception as exc:
                yield self.dead.tagged(exc, element)   # re-raises infrastructure failures
                return
            yield out

and in the composite transform: ``.with_outputs(ERRORS, main=...)`` then
``collect(outputs[ERRORS])``, which hands them to the pipeline's :class:`DeadLetters`
(Beam's ``ErrorHandler`` shape): a stage applied after the handler closed, a handler never
closed or an ``ERRORS`` output that nothing reads fails the pipeline's construction, so no
stage can lose its letters by being added in the wrong place. The cost per element is the ``try`` block (nothing when no
exception is raised) and one comparison; no extra Beam step per element. ``Map`` and
``FlatMap`` here wrap a plain function the same way, in the one step the plain
``beam.Map`` would take; :class:`MapPages` runs one per page of a batch of pages, in
one step per batch. :func:`each` gives batch DoFns (one store read for many
elements) the same isolation: a failed batch is redone element by element, so only the
elements that fail alone are set aside.

Governed by: nothing to set. Tests inject failures with ``BEAMCRAWL_FAIL_ELEMENT``
(core/runtime/faults.py).
"""

from __future__ import annotations

import errno
import sqlite3
import traceback
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence, TypeVar

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.pipeline import PipelineVisitor
from apache_beam.transforms.error_handling import ErrorHandler
from apache_beam.transforms.window import GlobalWindows

from beamcrawl.core.runtime import faults
from beamcrawl.schemas.records import Batched
import beamcrawl.schemas.coders  # noqa: F401  (registers the batch coder the output type names)
from beamcrawl.stores.base import StoreError

__all__ = [
    "ERRORS",
    "DeadLetter",
    "DeadLetters",
    "FlatMap",
    "Map",
    "MapPages",
    "Outlet",
    "collect",
    "collected",
    "dead_letter_row",
    "describe",
    "each",
    "is_infrastructure",
]

ERRORS = "errors"  # the tag of every stage's dead-letter output
MESSAGE_CHARS = 500
TRACEBACK_CHARS = 2000
TRACEBACK_FRAMES = 4
KEY_CHARS = 2000

T = TypeVar("T")

# An output folder or a store that cannot be used: errno values no web content produces.
_INFRA_ERRNOS = {
    errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EIO,
    errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EMFILE, errno.ENFILE, errno.ESTALE,
}  # fmt: skip


class DeadLetter(NamedTuple):
    """One element set aside: where it failed, what it was, and why."""

    stage: str
    key: str  # the element's key: a frontier row key (hex), host, domain or store key
    url: str  # the URL, where the element has one ("" otherwise)
    host: str  # the host, where the element has one ("" otherwise)
    exception: str  # the exception's type name
    message: str
    traceback: str  # the last few frames


def is_infrastructure(exc: BaseException) -> bool:
    """Whether ``exc`` is the store's or the output filesystem's failure (which fails the
    round, so that its rerun retries it) rather than one element's."""
    if isinstance(exc, (StoreError, sqlite3.Error, MemoryError, faults.InjectedInfrastructureFault)):
        return True
    module = type(exc).__module__
    if module.startswith(("google.api_core", "grpc")):
        return True
    # gzip's BadGzipFile is an OSError with no errno: a bad body, not a bad disk.
    return isinstance(exc, OSError) and exc.errno in _INFRA_ERRNOS and not _from_network(exc)


def _from_network(exc: OSError) -> bool:
    return type(exc).__module__.startswith("aiohttp") or isinstance(exc, (ConnectionError, TimeoutError))


def _text(value: Any, limit: int) -> str:
    """Text safe for a Parquet string column: valid UTF-8 (web bytes and lone surrogates
    escaped), at most ``limit`` characters."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = text[:limit]
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def describe(element: Any) -> tuple[str, str, str]:
    """``(key, url, host)`` of an element of any stage, for its dead letter.

    A page, fetch result or frontier entry is keyed by its frontier row key (hex, what the
    commit keeps); a host's record or plan by its host; a candidate link by its URL; a
    ``(key, value)`` pair by its value where that says more; a store row by its key.
    """
    fetch = getattr(element, "fetch", None)  # ParsedPage
    entry = getattr(fetch if fetch is not None else element, "entry", None)  # FetchResult
    if entry is None and hasattr(element, "due_ms") and hasattr(element, "fp"):
        entry = element  # FrontierEntry
    if entry is not None:
        key = entry.key
        return key.hex() if isinstance(key, bytes) else str(key), str(entry.url), str(entry.host)
    url = getattr(element, "url", None)
    host = getattr(element, "host", None)
    if url is not None or host is not None:  # Candidate, HostRecord, HostPlan, HostPolicy
        return str(url or host or ""), str(url or ""), str(host or "")
    if isinstance(element, dict):  # a page event row, or a page's link rows as columns
        url, host = element.get("url") or element.get("src") or "", element.get("host") or element.get("src_host") or ""
        url, host = (v[0] if isinstance(v, list) and v else v for v in (url, host))
        return str(url or ""), str(url or ""), str(host or "")
    if isinstance(element, tuple) and len(element) == 2:  # (key, value)
        key, value = element
        if not isinstance(value, (bytes, str, int, float, list, type(None))):
            inner = describe(value)
            if inner[1] or inner[2]:
                return inner
        if isinstance(key, (bytes, str)):  # a host, a domain, a store key: the stage says which
            return (key.hex() if isinstance(key, bytes) else key), "", ""
    if isinstance(element, bytes):
        return element.hex(), "", ""
    if isinstance(element, (list, tuple)):
        return f"batch of {len(element)}", "", ""
    return str(element), "", ""


class Outlet:
    """One stage's dead letters: its counters, its injected faults, its tagged outputs.

    Made in a DoFn's ``__init__`` (it pickles with it); the first :meth:`check` in a worker
    reads the injected faults once.
    """

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self._faults: list[tuple[str, bool]] | None = None
        self._counters: dict[str, Any] = {}

    def check(self, element: Any) -> None:
        """Raises the injected fault for ``element``, if a test asked for one (cheap otherwise)."""
        if self._faults is None:
            self._faults = faults.element_faults(self.stage)
        if self._faults:
            faults.fail_element(self.stage, self._faults, *describe(element))

    def faulty(self) -> bool:
        """Whether a test injected faults into this stage's elements (then each element must
        go through :meth:`check`; a stage may take a faster path otherwise)."""
        if self._faults is None:
            self._faults = faults.element_faults(self.stage)
        return bool(self._faults)

    def letter(self, exc: BaseException, element: Any, host: str | None = None) -> DeadLetter:
        """Counts ``exc`` for ``element`` and returns its dead letter (``host`` names the
        element's host where the element itself does not).

        Raises:
            exc: Itself, when it is the infrastructure's failure (:func:`is_infrastructure`).
        """
        if is_infrastructure(exc):
            raise exc
        name = type(exc).__name__
        counter = self._counters.get(name)
        if counter is None:
            counter = self._counters[name] = Metrics.counter("errors", f"{self.stage}/{name}")
        counter.inc()
        try:
            key, url, found = describe(element)
        except Exception:  # an element too odd to describe is still set aside
            key, url, found = repr(element)[:200], "", ""
        host = found if host is None else host
        frames = traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-TRACEBACK_FRAMES)
        return DeadLetter(
            stage=self.stage,
            key=_text(key, KEY_CHARS),
            url=_text(url, KEY_CHARS),
            host=_text(host, KEY_CHARS),
            exception=name,
            message=_text(str(exc), MESSAGE_CHARS),
            traceback=_text("".join(frames), TRACEBACK_CHARS),
        )

    def tagged(self, exc: BaseException, element: Any, host: str | None = None) -> beam.pvalue.TaggedOutput:
        """The dead letter as a tagged output of ``process``."""
        return beam.pvalue.TaggedOutput(ERRORS, self.letter(exc, element, host))

    def windowed(self, exc: BaseException, element: Any, host: str | None = None) -> beam.pvalue.TaggedOutput:
        """The dead letter as a tagged output of ``finish_bundle`` (which needs windows)."""
        return beam.pvalue.TaggedOutput(ERRORS, GlobalWindows.windowed_value(self.letter(exc, element, host)))


def each(outlet: Outlet, batch: Sequence[T], work: Callable[[Sequence[T]], Any]) -> list[DeadLetter]:
    """Runs ``work(batch)``; if it fails (not the infrastructure), runs ``work([item])`` for
    each item, and returns the dead letters of the items that fail alone.

    For batch DoFns whose work is idempotent (a store read then writes of whole cells):
    redoing the items that succeeded is harmless. Faults are injected per item.
    """
    try:
        for item in batch:
            outlet.check(item)
        work(batch)
        return []
    except Exception as exc:
        if is_infrastructure(exc) or len(batch) == 1:
            return [outlet.letter(exc, batch[0] if len(batch) == 1 else batch)]
    letters = []
    for item in batch:
        try:
            outlet.check(item)
            work([item])
        except Exception as exc:
            letters.append(outlet.letter(exc, item))
    return letters


class _GuardedFn(beam.DoFn):
    """A plain function per element, its failures set aside."""

    def __init__(self, stage: str, fn: Callable[[Any], Any], flat: bool, host: Callable[[Any], str] | None) -> None:
        self.fn = fn
        self.flat = flat
        self.host = host
        self.dead = Outlet(stage)

    def process(self, element: Any) -> Iterator[Any]:
        try:
            self.dead.check(element)
            out = self.fn(element)
            if self.flat:
                out = list(out)  # a generator fails as it runs: run it inside the try
        except Exception as exc:
            yield self.dead.tagged(exc, element, self._host(element))
            return
        if self.flat:
            yield from out
        else:
            yield out

    def _host(self, element: Any) -> str | None:
        try:
            return self.host(element) if self.host is not None else None
        except Exception:
            return None


class Map(beam.PTransform):
    """``beam.Map(fn)`` whose failures are dead letters of ``stage`` (one step all the same).

    ``host`` names an element's host where :func:`describe` cannot (a ``(host, ...)`` pair):
    a host that keeps failing is then quarantined."""

    def __init__(
        self, stage: str, fn: Callable[[Any], Any], flat: bool = False, host: Callable[[Any], str] | None = None
    ) -> None:
        super().__init__()
        self.stage = stage
        self.fn = fn
        self.flat = flat
        self.host = host

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        out = pcoll | beam.ParDo(_GuardedFn(self.stage, self.fn, self.flat, self.host)).with_outputs(ERRORS, main="out")
        collect(out[ERRORS])
        return out.out


class FlatMap(Map):
    """``beam.FlatMap(fn)`` whose failures are dead letters of ``stage``."""

    def __init__(self, stage: str, fn: Callable[[Any], Iterable[Any]]) -> None:
        super().__init__(stage, fn, flat=True)


class _GuardedPagesFn(beam.DoFn):
    """A plain function per page of a batch, each page's failure set aside alone."""

    def __init__(self, stage: str, fn: Callable[[Any], Any], flat: bool) -> None:
        self.fn = fn
        self.flat = flat
        self.dead = Outlet(stage)

    def process(self, batch: Any) -> Iterator[Any]:
        out: list[Any] = []
        for page in batch.pages:
            try:
                self.dead.check(page)
                found = self.fn(page)
                if self.flat:
                    out.extend(found)  # a generator fails as it runs: inside the try
                elif found is not None:
                    out.append(found)
            except Exception as exc:
                yield self.dead.tagged(exc, page)
        if out:
            yield Batched(out)


class MapPages(beam.PTransform):
    """A plain function of a page applied to every page of a batch (``PageBatch``, the
    elements after content seen): one list per batch of what it returned (None dropped; with
    ``flat``, the items it gave), nothing for a batch that gave nothing. A page whose call
    fails is one dead letter of ``stage``; the batch's other pages go on. One DoFn call per
    batch, not per page: the per-element cost of a step is the runner's, whatever it does."""

    def __init__(self, stage: str, fn: Callable[[Any], Any], flat: bool = False) -> None:
        super().__init__()
        self.stage = stage
        self.fn = fn
        self.flat = flat

    def expand(self, batches: beam.PCollection) -> beam.PCollection:
        out = (
            batches
            | beam.ParDo(_GuardedPagesFn(self.stage, self.fn, self.flat))
            .with_output_types(Batched)  # its coder estimates a batch's size from a few items
            .with_outputs(ERRORS, main="out")
        )
        collect(out[ERRORS])
        return out.out


_HANDLER_ATTR = "_beamcrawl_dead_letters"  # the pipeline's DeadLetters (open or closed)


class DeadLetters(ErrorHandler):
    """Where every stage's dead letters in a pipeline go: Beam's ``ErrorHandler`` shape.

    ``with DeadLetters(p, consumer):`` around the stages (the round's consumer writes
    ``errors/``): each stage's :func:`collect` adds its letters to the pipeline's open
    handler, and leaving the block applies ``consumer`` to all of them, once. Letters cannot be forgotten: a stage applied
    after the handler closed fails at once (:func:`collect`); a handler never closed, or a
    stage's ``ERRORS`` output that nothing reads, fails the pipeline's ``run()`` before any
    work starts (Beam calls :meth:`verify_closed`). A pipeline has one handler; stages
    applied with none open (a test's) get a collecting one, which :func:`collected` closes.
    """

    def __init__(
        self, p: beam.Pipeline | beam.pvalue.PBegin, consumer: beam.PTransform, label: str = "Gather dead letters"
    ) -> None:
        super().__init__(consumer)
        self._creation_traceback = traceback.format_stack()[-2]  # who made it, for the errors
        self.pipeline: beam.Pipeline = getattr(p, "pipeline", None) or p
        self.label = label
        self._registered = False

    def __enter__(self) -> DeadLetters:
        held = getattr(self.pipeline, _HANDLER_ATTR, None)
        if held is not None and held is not self:
            raise RuntimeError(
                "this pipeline already has a dead-letter handler (made at "
                f"{held._creation_traceback.strip()}): apply every stage inside that one"
            )
        setattr(self.pipeline, _HANDLER_ATTR, self)
        return self

    def add_error_pcollection(self, pcoll: beam.PCollection) -> None:
        if self._closed:
            raise RuntimeError(
                f"dead letters {pcoll} come after the pipeline's dead-letter handler closed "
                f"(made at {self._creation_traceback.strip()}): apply the stage inside it"
            )
        self._register()
        self._error_pcolls.append(pcoll)

    def _register(self) -> None:
        if not self._registered:
            self.pipeline._register_error_handler(self)  # Beam verifies it when the pipeline runs
            self._registered = True

    def close(self) -> None:
        """Applies the consumer to all the letters added (an empty collection if none)."""
        if self._closed:
            return
        self._register()  # with no letters too: the graph's unread ERRORS outputs are checked
        if self._error_pcolls:
            letters = tuple(self._error_pcolls) | self.label >> beam.Flatten()
        else:
            letters = self.pipeline | self.label >> beam.Create([])
        self._output = letters | self._consumer
        self._closed = True
        setattr(self.pipeline, _HANDLER_ATTR, self)  # stays: a later stage's letters fail

    def verify_closed(self) -> None:
        super().verify_closed()
        lost = _unread_letters(self.pipeline)
        if lost:
            raise RuntimeError(
                f"the dead letters of {', '.join(lost)} are read by nothing: pass each stage's "
                "ERRORS output to dead_letter.collect()"
            )


class _Passed(beam.PTransform):
    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        return pcoll


class _UnreadLetters(PipelineVisitor):
    def __init__(self) -> None:
        self.made: dict[int, str] = {}
        self.read: set[int] = set()

    def visit_transform(self, node: Any) -> None:
        self.read.update(id(pcoll) for pcoll in node.inputs)
        for tag, pcoll in node.outputs.items():
            if tag == ERRORS:
                self.made[id(pcoll)] = node.full_label


def _unread_letters(p: beam.Pipeline) -> list[str]:
    """The steps whose ``ERRORS`` output no transform reads."""
    visitor = _UnreadLetters()
    p.visit(visitor)
    return sorted(label for key, label in visitor.made.items() if key not in visitor.read)


def collect(errors: beam.PCollection) -> None:
    """Adds a stage's dead letters to its pipeline's open :class:`DeadLetters`, so that
    stages keep their outputs as they were and the pipeline handles all its letters once.
    With none open, a collecting handler is opened, which :func:`collected` must close.

    Raises:
        RuntimeError: The pipeline's handler has closed (the stage comes too late).
    """
    handler = getattr(errors.pipeline, _HANDLER_ATTR, None)
    if handler is None:
        handler = DeadLetters(errors.pipeline, _Passed()).__enter__()
    handler.add_error_pcollection(errors)


def collected(p: beam.Pipeline, label: str = "Gather dead letters") -> beam.PCollection:
    """Closes ``p``'s collecting handler (see :func:`collect`) and returns every dead letter
    added to it, as one PCollection: for tests, which apply stages without a consumer."""
    handler = getattr(p, _HANDLER_ATTR, None)
    if handler is None:
        handler = DeadLetters(p, _Passed(), label).__enter__()
    if not isinstance(handler._consumer, _Passed):
        raise RuntimeError("this pipeline's dead letters go to its DeadLetters consumer, not to collected()")
    handler.label = label
    handler.close()
    return handler.output()


def dead_letter_row(letter: DeadLetter) -> dict[str, Any]:
    """A dead letter as its errors/ row (ERRORS_SCHEMA's names; the round is the folder,
    ``errors/round=N/``, as for pages/ and links/)."""
    return letter._asdict()
