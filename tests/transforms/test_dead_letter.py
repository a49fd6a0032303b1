"""transforms/dead_letter.py: one element's failure set aside, the same way in every stage."""

from __future__ import annotations

import errno
import gzip
import sqlite3

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.runtime import faults
from beamcrawl.core.runtime.outputs import RoundOutputs
from beamcrawl.schemas.arrow import ERRORS_SCHEMA
from beamcrawl.schemas.records import FetchResult, FrontierEntry, HostRecord, ParsedPage
from beamcrawl.stores.base import StoreError
from beamcrawl.transforms import dead_letter, parquet_io
from beamcrawl.transforms.dead_letter import ERRORS, Outlet, collected, describe, each, is_infrastructure
from beamcrawl.transforms.parse import ParsePages


def _entry(url: str = "http://a.test/x", host: str = "a.test") -> FrontierEntry:
    return FrontierEntry(url=url, fp=42, host=host, due_ms=1000)


def _result(url: str = "http://a.test/x", host: str = "a.test") -> FetchResult:
    body = b"<html><body><a href='/y'>y</a></body></html>"
    return FetchResult(entry=_entry(url, host), url=url, outcome="fetched", status=200,
                       response_headers=[("Content-Type", "text/html")], body=body, raw_body=body)  # fmt: skip


def test_describe_names_each_kind_of_element():
    entry = _entry()
    assert describe(entry) == (entry.key.hex(), "http://a.test/x", "a.test")
    assert describe(_result()) == (entry.key.hex(), "http://a.test/x", "a.test")
    assert describe(ParsedPage(fetch=_result())) == (entry.key.hex(), "http://a.test/x", "a.test")
    assert describe(("a.test", HostRecord(host="a.test"))) == ("a.test", "", "a.test")
    assert describe({"url": "http://a.test/", "host": "a.test"}) == ("http://a.test/", "http://a.test/", "a.test")
    assert describe({"src": ["http://a.test/"] * 2, "src_host": ["a.test"] * 2})[1] == "http://a.test/"
    assert describe((b"\x01\x02", {"r:json": b"{}"})) == ("0102", "", "")
    assert describe(("example.com", ["a", "b"])) == ("example.com", "", "")  # a domain is no host
    assert describe(["x", "y"]) == ("batch of 2", "", "")


@given(st.one_of(st.text(), st.binary(), st.integers(), st.none(), st.lists(st.text(), max_size=3),
                 st.tuples(st.text(), st.text()), st.dictionaries(st.text(), st.text(), max_size=3)))  # fmt: skip
def test_a_letter_is_made_for_any_element_and_fits_the_schema(element):
    letter = Outlet("test").letter(ValueError("bad \udcff value"), element)
    table = pa.Table.from_pylist([dead_letter.dead_letter_row(letter)], schema=ERRORS_SCHEMA)
    assert table.num_rows == 1 and letter.exception == "ValueError"


def test_infrastructure_failures_are_not_set_aside():
    assert is_infrastructure(StoreError("store gone"))
    assert is_infrastructure(sqlite3.OperationalError("database is locked"))
    assert is_infrastructure(OSError(errno.EROFS, "read-only file system"))
    assert is_infrastructure(OSError(errno.ENOSPC, "no space left"))
    assert is_infrastructure(faults.InjectedInfrastructureFault("x"))
    # What a hostile page can raise is the element's.
    assert not is_infrastructure(ValueError("row keys must not be empty"))
    assert not is_infrastructure(gzip.BadGzipFile("not gzip"))
    assert not is_infrastructure(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad"))
    assert not is_infrastructure(ConnectionResetError(errno.ECONNRESET, "reset"))
    with pytest.raises(StoreError):
        Outlet("test").letter(StoreError("store gone"), "x")


def test_injected_faults_match_text_or_an_anchored_end(monkeypatch):
    monkeypatch.setenv(faults.ELEMENT_ENV, "parse:b.test:81/$,parse:zzz,record:a.test:infra")
    outlet = Outlet("parse")
    outlet.check(_result("http://b.test:81/robots.txt", "b.test:81"))  # anchored: not this one
    with pytest.raises(faults.InjectedFault):
        outlet.check(_result("http://b.test:81/", "b.test:81"))
    with pytest.raises(faults.InjectedFault):
        outlet.check(_result("http://c.test/zzz", "c.test"))
    assert faults.element_faults("record") == [("a.test", True)]
    with pytest.raises(faults.InjectedInfrastructureFault):
        Outlet("record").check(_result())


def test_each_redoes_a_failed_batch_item_by_item():
    done: list[str] = []

    def work(batch):
        if "" in batch:
            raise ValueError("row keys must not be empty")
        done.extend(batch)

    letters = each(Outlet("test"), ["a", "", "b"], work)
    assert done == ["a", "b"]
    assert [(l.key, l.exception) for l in letters] == [("", "ValueError")]
    with pytest.raises(StoreError):
        each(Outlet("test"), ["a", "b"], lambda batch: (_ for _ in ()).throw(StoreError("gone")))


def test_a_guarded_map_sets_the_failing_element_aside():
    def fn(x: int) -> int:
        return 10 // x

    with TestPipeline() as p:
        out = p | beam.Create([1, 0, 2]) | "Divide" >> dead_letter.Map("test", fn)
        letters = collected(p) | beam.Map(lambda l: (l.stage, l.key, l.exception))
        assert_that(out, equal_to([10, 5]), label="good")
        assert_that(letters, equal_to([("test", "0", "ZeroDivisionError")]), label="letters")


def test_parse_stage_with_an_injected_failure(monkeypatch):
    """A stage in a TestPipeline: the failing page is dead-lettered, the others go on."""
    monkeypatch.setenv(faults.ELEMENT_ENV, "parse:http://b.test/$")
    results = [_result("http://a.test/", "a.test"), _result("http://b.test/", "b.test")]
    with TestPipeline() as p:
        pages = p | beam.Create(results) | ParsePages("beamcrawl")
        urls = pages | beam.Map(lambda page: (page.fetch.url, page.parse_error is None, len(page.links)))
        letters = collected(p) | beam.Map(lambda l: (l.stage, l.url, l.exception))
        # Parse sets the page aside and still passes it on, with its error and no links,
        # to be archived; the commit keeps its frontier row.
        assert_that(urls, equal_to([("http://a.test/", True, 1), ("http://b.test/", False, 0)]), label="pages")
        assert_that(letters, equal_to([("parse", "http://b.test/", "InjectedFault")]), label="letters")


def test_write_dead_letters_writes_errors_parquet(tmp_path):
    outputs = RoundOutputs(str(tmp_path), 3)
    # Letters are made safe for Parquet (and for Beam's string coder) when they are made.
    letter = Outlet("parse").letter(ValueError("bad"), {"url": "http://a.test/\udcff", "host": "a.test"})
    with TestPipeline() as p:
        _ = p | beam.Create([letter]) | parquet_io.WriteDeadLetters(outputs)
    (path,) = (tmp_path / "_staging" / "round=3" / "errors").iterdir()
    table = pq.read_table(path)
    assert table.schema.equals(ERRORS_SCHEMA, check_metadata=True)
    assert table.to_pylist()[0]["url"] == "http://a.test/\\udcff"


def test_a_row_arrow_refuses_costs_that_row_not_the_part(tmp_path):
    fn = parquet_io._ParquetPartsFn(str(tmp_path), ERRORS_SCHEMA, ("stage",), "errors")
    fn.start_bundle()
    fn.process({"stage": "a", "exception": "E", "url": "http://ok/"})
    fn.process({"stage": "b", "exception": "E", "url": "http://bad/\udcff"})  # a lone surrogate
    out = fn.finish_bundle()
    assert [o.value.value.url for o in out if o.tag == ERRORS] == ["http://bad/\\udcff"]
    (path,) = tmp_path.iterdir()
    assert pq.read_table(path).column("url").to_pylist() == ["http://ok/"]


def test_a_host_whose_crawl_raised_is_a_dead_letter_of_fetch():
    """The fetcher hands back a host whose crawl raised (its URLs come back deferred)."""
    from beamcrawl.core.runtime.config import CrawlConfig
    from beamcrawl.schemas.records import HostPlan
    from beamcrawl.transforms.fetch import _FetchShardsFn

    fn = _FetchShardsFn(CrawlConfig(out="unused", store="unused"))
    plan = HostPlan(
        host="a.test:81", shard=0, record=HostRecord(host="a.test:81"), delay=1.0, fetch_robots=False, entries=[]
    )
    out = fn._route("failed", (plan, RuntimeError("bug in one request")))
    assert out.tag == ERRORS
    assert (out.value.stage, out.value.host, out.value.exception) == ("fetch", "a.test:81", "RuntimeError")


# --- letters that cannot be forgotten (DeadLetters: Beam's ErrorHandler shape) --------------


def _divide(x: int) -> int:
    return 10 // x


def test_the_handler_gives_every_stages_letters_to_its_consumer():
    p = TestPipeline(runner="FnApiRunner")
    with dead_letter.DeadLetters(p, beam.Map(lambda l: (l.stage, l.key))) as letters:
        nums = p | beam.Create([1, 0, 2])
        _ = nums | "First" >> dead_letter.Map("first", _divide)
        _ = nums | "Second" >> dead_letter.Map("second", lambda x: _divide(x - 1))
    assert_that(letters.output(), equal_to([("first", "0"), ("second", "1")]))
    p.run().wait_until_finish()


def test_a_stage_applied_after_the_letters_were_gathered_fails_at_once():
    p = TestPipeline(runner="FnApiRunner")
    nums = p | beam.Create([1, 0])
    _ = nums | "Before" >> dead_letter.Map("before", _divide)
    _ = collected(p)
    with pytest.raises(RuntimeError, match="after the pipeline's dead-letter handler closed"):
        _ = nums | "After" >> dead_letter.Map("after", _divide)
    # The same with a handler of the round's shape.
    q = TestPipeline(runner="FnApiRunner")
    with dead_letter.DeadLetters(q, beam.Map(lambda l: l)):
        _ = q | "Inside" >> beam.Create([1]) | "Guarded" >> dead_letter.Map("inside", _divide)
    with pytest.raises(RuntimeError, match="apply the stage inside it"):
        _ = q | "Late" >> beam.Create([0]) | "Late stage" >> dead_letter.Map("late", _divide)


def test_letters_nobody_gathers_fail_the_pipeline_before_it_runs(tmp_path):
    ran = tmp_path / "ran"
    p = TestPipeline(runner="FnApiRunner")
    _ = p | beam.Create([0]) | dead_letter.Map("lost", lambda x: ran.write_text("x") and _divide(x))
    with pytest.raises(RuntimeError, match="Unclosed error handler"):
        p.run()
    assert not ran.exists()  # refused at construction: nothing ran


@settings(max_examples=10, deadline=None)
@given(st.sets(st.sampled_from(["parse", "fetch", "record", "select"]), min_size=1))
def test_an_errors_output_that_nothing_reads_fails_the_pipeline(forgotten):
    """Any stage whose ``ERRORS`` output is left unread is named; the gathered ones are not."""

    class _Fn(beam.DoFn):
        def __init__(self) -> None:
            self.dead = Outlet("x")

        def process(self, x):
            yield x

    p = TestPipeline(runner="FnApiRunner")
    nums = p | beam.Create([1])
    for stage in ["parse", "fetch", "record", "select"]:
        out = nums | stage >> beam.ParDo(_Fn()).with_outputs(ERRORS, main="out")
        if stage not in forgotten:
            dead_letter.collect(out[ERRORS])
    _ = collected(p)
    with pytest.raises(RuntimeError, match="read by nothing") as raised:
        p.run()
    named = {stage for stage in ["parse", "fetch", "record", "select"] if f"{stage}/ParDo(_Fn)" in str(raised.value)}
    assert named == forgotten
