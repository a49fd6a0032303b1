"""Pages travel as batches after content seen: one poisoned page of a batch is one dead letter.

Every stage after "Mark copies" takes a :class:`~beamcrawl.schemas.records.PageBatch` per
DoFn call. For each of them, a batch of three pages whose middle one has fields that make the
stage's own per-page function raise (no injected fault) must give exactly one dead letter,
naming that page and the stage, and for the two others what a batch of only those two gives:
the same files, store rows and elements, read back with real readers. Mark copies itself is
checked on a real batch file of the round's staging.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import pickle
from pathlib import Path
from typing import Any, Callable

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.core.policy.change_rate import SchedulePolicy
from beamcrawl.core.runtime.batch_files import BatchWriter
from beamcrawl.core.runtime.outputs import DONE, REQUEUE, RoundOutputs
from beamcrawl.core.urls.urlnorm import fingerprint, host_of
from beamcrawl.schemas.records import FetchResult, FrontierEntry, Packed, PageBatch, ParsedPage
from beamcrawl.stores.base import open_store
from beamcrawl.transforms import content_seen
from beamcrawl.transforms.budgets import CountLinkingDomains, DomainState
from beamcrawl.transforms.content_seen import Copy
from beamcrawl.transforms.dead_letter import ERRORS, collected
from beamcrawl.transforms.freshness import ScheduleRevisits, schedule_page
from beamcrawl.transforms.parquet_io import WriteLinkEdges, WritePageEvents
from beamcrawl.transforms.parse import parse_fetch
from beamcrawl.transforms.record import RecordUrlState
from beamcrawl.transforms.url_seen import ExtractCandidates
from beamcrawl.transforms.warc_io import WriteWarc, page_event

FETCHED_AT = 1_767_225_600.0
POLICY = SchedulePolicy()


def _page(url: str, n: int) -> ParsedPage:
    """A parsed 200 with a link on its own site and one to another domain, scheduled."""
    body = f"<html><head><title>p{n}</title></head><body><a href='/next{n}'>next</a> <a href='http://other{n}.org/'>o</a></body></html>"
    entry = FrontierEntry(url=url, fp=fingerprint(url), host=host_of(url), due_ms=0, depth=1)
    fetch = FetchResult(
        entry=entry,
        outcome="fetched",
        url=url,
        final_url=url,
        status=200,
        fetched_at=FETCHED_AT + n,
        elapsed=0.05,
        ip="127.0.0.1",
        reason="OK",
        request_headers=[("User-Agent", "beamcrawl-test/1")],
        response_headers=[("Content-Type", "text/html; charset=utf-8")],
        raw_body=body.encode(),
        body=body.encode(),
    )
    page = parse_fetch(fetch, "beamcrawl")
    assert len(page.links) == 2
    return schedule_page(page, POLICY)  # as the stages after "Schedule revisits" get it


def _pages() -> tuple[ParsedPage, ParsedPage, ParsedPage]:
    return _page("http://a.test/one", 1), _page("http://b.test/two", 2), _page("http://c.test/three", 3)


# --- poisons: fields that make one stage's own per-page function raise ---------------------


def _bad_status(page: ParsedPage) -> None:
    page.fetch.status = "200"  # type: ignore[assignment]  # freshness compares it to ints


def _bad_fetch_time(page: ParsedPage) -> None:
    page.fetch.fetched_at = "yesterday"  # type: ignore[assignment]  # WARC-Date, url state, edge times


def _bad_depth(page: ParsedPage) -> None:
    page.fetch.entry.depth = "one"  # type: ignore[assignment]  # a link is one deeper


def _bad_links(page: ParsedPage) -> None:
    page.links = 5  # type: ignore[assignment]  # not a list of links


def _bad_event_status(page: ParsedPage) -> None:
    page.fetch.status = "not a number"  # type: ignore[assignment]  # the pages/ status column is an int


# --- what each stage gives, read back -----------------------------------------------------


@dataclasses.dataclass
class _Ctx:
    tmp: Path
    outputs: RoundOutputs
    store: str
    sink: str
    leave_out: str = ""  # the poisoned page's fingerprint (hex), for a stage whose other branches keep it


class _Sink(beam.DoFn):
    """Appends each element, as JSON, to a file (the runner is in this process)."""

    def __init__(self, path: str, show: Callable[[Any], Any]) -> None:
        self.path = path
        self.show = show

    def process(self, element: Any) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(self.show(element), default=str, sort_keys=True) + "\n")


def _sunk(ctx: _Ctx) -> list[Any]:
    if not os.path.exists(ctx.sink):
        return []
    return sorted(json.loads(line) for line in open(ctx.sink, encoding="utf-8"))


def _schedule(batches: beam.PCollection, ctx: _Ctx) -> None:
    scheduled = batches | ScheduleRevisits(POLICY)
    show = lambda b: [[pg.fetch.url, pg.schedule, pg.revisit] for pg in b.pages]  # noqa: E731
    _ = scheduled | beam.ParDo(_Sink(ctx.sink, show))


def _read_scheduled(ctx: _Ctx) -> list[Any]:
    (batch,) = _sunk(ctx)  # the batch goes on as one element
    return batch


def _store(batches: beam.PCollection, ctx: _Ctx) -> None:
    events = batches | WriteWarc(ctx.outputs, 1 << 30, "beamcrawl-test/1")
    _ = events | beam.ParDo(_Sink(ctx.sink, lambda evs: [[e["url"], e["status"], bool(e["blob"])] for e in evs]))


def _read_store(ctx: _Ctx) -> list[Any]:
    (events,) = _sunk(ctx)  # one list of events for the batch
    records = []
    for path in glob.glob(f"{ctx.outputs.staged('warc')}/*.warc.gz"):
        with open(path, "rb") as fh:
            for r in ArchiveIterator(fh, check_digests="raise"):
                if r.rec_type != "warcinfo":
                    records.append((r.rec_type, r.rec_headers.get_header("WARC-Target-URI"), r.content_stream().read()))
    return [events, sorted(records)]


def _publish_pages(batches: beam.PCollection, ctx: _Ctx) -> None:
    events = batches | beam.Map(lambda b: [page_event(pg, f"warc/x@{pg.fetch.entry.fp}") for pg in b.pages])
    _ = events | WritePageEvents(ctx.outputs)


def _parquet_rows(folder: str) -> list[dict[str, Any]]:
    rows = [r for path in sorted(glob.glob(f"{folder}/*.parquet")) for r in pq.read_table(path).to_pylist()]
    return sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True))


def _publish_links(batches: beam.PCollection, ctx: _Ctx) -> None:
    _ = batches | WriteLinkEdges(ctx.outputs)


def _candidates(batches: beam.PCollection, ctx: _Ctx) -> None:
    blocks = batches | ExtractCandidates()  # a block of columns a batch
    _ = blocks | beam.ParDo(
        _Sink(ctx.sink, lambda block: sorted((c.url, c.depth, c.source) for c in block.to_candidates()))
    )


def _read_candidates(ctx: _Ctx) -> list[Any]:
    (found,) = _sunk(ctx)  # one block for the batch
    return found


def _record(batches: beam.PCollection, ctx: _Ctx) -> None:
    _ = batches | RecordUrlState(ctx.store, ctx.outputs)


def _read_record(ctx: _Ctx) -> list[Any]:
    """The URL rows written, and the finished keys and next visits staged, but those of
    ``ctx.leave_out``: a page whose URL state fails is that branch's dead letter, while its
    finished key and next visit, which did not fail, are staged as before (the commit keeps
    the frontier row of a URL with a dead letter)."""
    with open_store(ctx.store) as store:
        rows = sorted((key.hex(), sorted(cells.items())) for key, cells in store.read_range("urls"))
    staged = {
        kind: sorted(
            line
            for path in glob.glob(f"{ctx.outputs.staged(kind)}/*")
            for line in open(path)
            if not (ctx.leave_out and ctx.leave_out in line.split(" ", 1)[0])
        )
        for kind in (DONE, REQUEUE)
    }
    return [rows, staged]


def _linking_domains(batches: beam.PCollection, ctx: _Ctx) -> None:
    _ = batches | CountLinkingDomains(ctx.store)


def _read_linking_domains(ctx: _Ctx) -> list[Any]:
    with open_store(ctx.store) as store:
        return sorted(
            (key.decode(), DomainState.from_cells(key.decode(), cells).linkers.count())
            for key, cells in store.read_range("domains")
        )


CASES = {
    # stage label: (its dead letters' stage, the poison, apply the stage, read what it gave)
    "Schedule revisits": ("freshness", _bad_status, _schedule, _read_scheduled),
    "Store pages once": ("store", _bad_fetch_time, _store, _read_store),
    # Its records serialise, its event does not: no record of it may stay in the WARC file.
    "Store pages once, the event": ("store", _bad_links, _store, _read_store),
    "Publish page events": (
        "publish_pages",
        _bad_event_status,
        _publish_pages,
        lambda ctx: _parquet_rows(ctx.outputs.staged("pages")),
    ),
    "Publish link edges": (
        "publish_links",
        _bad_fetch_time,
        _publish_links,
        lambda ctx: _parquet_rows(ctx.outputs.staged("links")),
    ),
    "Discovered URLs": ("url_seen", _bad_depth, _candidates, _read_candidates),
    "Record URL state": ("record", _bad_fetch_time, _record, _read_record),
    "Record linking domains": ("budgets", _bad_links, _linking_domains, _read_linking_domains),
}


def _run(
    tmp: Path, name: str, pages: list[ParsedPage], apply: Callable, read: Callable, leave_out: str = ""
) -> tuple[Any, list]:
    folder = tmp / name
    folder.mkdir()
    outputs = RoundOutputs(str(folder / "out"), 1)
    outputs.prepare()
    ctx = _Ctx(folder, outputs, f"sqlite:///{folder}/store.sqlite", str(folder / "sink.jsonl"), leave_out)
    letters_at = str(folder / "letters.jsonl")
    p = TestPipeline(runner="FnApiRunner")
    apply(p | beam.Create([PageBatch(pages)]), ctx)
    _ = collected(p) | "Sink letters" >> beam.ParDo(
        _Sink(letters_at, lambda letter: [letter.stage, letter.url, letter.exception])
    )
    p.run().wait_until_finish()
    letters = [json.loads(line) for line in open(letters_at)] if os.path.exists(letters_at) else []
    return read(ctx), letters


@pytest.mark.parametrize("stage", sorted(CASES))
def test_a_poisoned_page_is_one_dead_letter_and_its_batch_goes_on(tmp_path: Path, stage: str) -> None:
    letter_stage, poison, apply, read = CASES[stage]
    first, bad, last = _pages()
    poison(bad)
    leave_out = f"{bad.fetch.entry.fp:016x}" if stage == "Record URL state" else ""
    got, letters = _run(tmp_path, "poisoned", [first, bad, last], apply, read, leave_out)
    assert len(letters) == 1, letters
    (named_stage, url, _exception), *_ = letters
    assert (named_stage, url) == (letter_stage, bad.fetch.url)
    clean, none = _run(tmp_path, "clean", list(_pages()[::2]), apply, read)
    assert none == []
    assert clean and got == clean  # the batch's other pages: exactly what they give alone
    assert bad.fetch.url not in json.dumps(got, default=str)


def test_mark_copies_reads_a_batch_file_back_as_one_batch_and_sets_a_bad_page_aside(tmp_path: Path) -> None:
    """A page that fails marking (a payload size that is no number) is one dead letter; the
    file's other pages come out as one batch, in the file's order, copies marked."""
    first, bad, last = _pages()
    bad.fetch.body_size = "large"  # type: ignore[assignment]
    writer = BatchWriter(str(tmp_path), 10, 1 << 20)
    for run in ([first, bad], [last]):  # a file's records are runs of pages, one pickle a run
        assert writer.append(pickle.dumps(Packed(run), pickle.HIGHEST_PROTOCOL)) is None
    ref = writer.close()
    assert ref is not None
    copy = Copy(first.fetch.url, "http://original.test/", "exact", 0, 5.0, "sha1:X", ref.name)
    fn = content_seen._MarkCopiesFn(str(tmp_path))
    # As "Join batches and their copies" gives it: the batch's name, its file, its copies.
    out = list(fn.process((ref.name, {content_seen.WAITING: [ref], content_seen.COPIES: [copy]})))
    letters = [o.value for o in out if isinstance(o, beam.pvalue.TaggedOutput) and o.tag == ERRORS]
    batches = [o for o in out if not isinstance(o, beam.pvalue.TaggedOutput)]
    assert [(x.stage, x.url, x.exception) for x in letters] == [("content_seen", bad.fetch.url, "TypeError")]
    (batch,) = batches
    assert type(batch) is PageBatch
    assert [pg.fetch.url for pg in batch.pages] == [first.fetch.url, last.fetch.url]
    assert batch.pages[0].duplicate_of == "http://original.test/" and batch.pages[1].duplicate_of is None
