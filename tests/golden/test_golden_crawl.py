"""The crawl's outputs, pinned: a crawl of one simweb must give the golden summary.

The golden (``simweb_golden.json.gz``, written by ``make_golden.py``) is the summary
(``golden_summary.py``) of the golden crawl (``golden_crawl.py``): 20 simweb hosts with copy
hosts, three rounds through the CLI, in a network namespace of its own so that its bytes are
the same on every run. A change to how the crawler stores, decides or records anything shows
here as the rows it changed: every WARC record (by round, type, URL, status, payload digest,
revisit profile and target, truncation) and CDXJ line, every row of ``pages/`` and
``links/`` with every column that is not a clock reading (the dedup decisions among them),
the seen set, the host records and the frontier.

When a change of the outputs is intended (or simweb or the settings change), make a new
golden with ``.venv/bin/python tests/golden/make_golden.py`` and say why in the commit.
"""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from golden_crawl import SETTINGS, crawl
from golden_summary import diff, summarize
from make_golden import GOLDEN, load

REGENERATE = ".venv/bin/python tests/golden/make_golden.py"


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    return load(GOLDEN)


def _rows(golden: dict[str, Any], section: str) -> list[dict[str, Any]]:
    table = golden[section]
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


@pytest.mark.e2e
def test_a_crawl_of_the_golden_web_gives_the_golden_summary(golden: dict[str, Any], tmp_path: Path) -> None:
    out = crawl(tmp_path / "golden-crawl")
    lines = diff(golden, summarize(out))
    if lines:
        made = golden["header"]["commit"]
        pytest.fail(
            f"the crawl's outputs differ from the golden (made at {made}); crawl output: {out}\n"
            + "\n".join(lines)
            + f"\nIf the change is intended, regenerate: {REGENERATE}",
            pytrace=False,
        )


def test_the_golden_was_made_with_these_settings(golden: dict[str, Any]) -> None:
    assert golden["header"]["settings"] == json.loads(json.dumps(SETTINGS)), (
        f"golden_crawl.SETTINGS changed since the golden was made: regenerate it ({REGENERATE})"
    )


def test_the_golden_covers_every_kind_of_outcome(golden: dict[str, Any]) -> None:
    """The golden pins the cases that matter, not only ordinary pages."""
    pages = _rows(golden, "pages")
    warc = _rows(golden, "warc")
    assert {p["round"] for p in pages} == {1, 2, 3}
    assert len({p["host"] for p in pages}) >= 15

    first_fetch: dict[str, int] = defaultdict(lambda: 99)
    for p in pages:
        first_fetch[p["url"]] = min(first_fetch[p["url"]], p["round"])
    exact = [p for p in pages if p["duplicate_kind"] == "exact" and p["status"] == 200]
    assert any(first_fetch[p["duplicate_of"]] == p["round"] for p in exact)  # a copy met in its original's round
    assert any(first_fetch[p["duplicate_of"]] < p["round"] for p in exact)  # a copy of a page stored earlier
    assert any(p["duplicate_kind"] == "near" for p in pages)
    assert all(p["blob_record"] is None for p in pages if p["duplicate_kind"] == "near")
    assert any(p["blob_record"] == f"revisit {p['url']}" for p in exact)

    profiles = defaultdict(list)
    for r in warc:
        if r["type"] == "revisit":
            profiles[r["profile"].rsplit("/", 1)[1]].append(r)
    assert profiles["server-not-modified"]  # 304s
    # A page without validators fetched again unchanged: a revisit of its own capture.
    assert any(r["refers_to_uri"] == r["uri"] for r in profiles["identical-payload-digest"])
    statuses = {r["status"] for r in warc if r["type"] == "response"}
    assert {200, 301, 404, 500} <= statuses
    assert any(r["truncated"] == "length" for r in warc if r["type"] == "response")
    assert any(r["type"] == "request" for r in warc)

    cdxj = _rows(golden, "cdxj")
    assert len(cdxj) == sum(r["type"] in ("response", "revisit") for r in warc)
    assert all(c["record"] in (f"response {c['url']}", f"revisit {c['url']}") for c in cdxj)

    states = {u["state"] for u in _rows(golden, "urls")}
    assert {"fetched", "queued", "robots_disallowed"} <= states
    robots = {h["robots_kind"] for h in _rows(golden, "hosts")}
    assert {"parsed", "allow_all", "disallow_all"} <= robots
    assert _rows(golden, "frontier")


def test_a_difference_is_shown_as_the_rows_and_columns_that_differ(golden: dict[str, Any]) -> None:
    """The diff names the section, the row and the changed columns, not the whole summary."""
    changed = copy.deepcopy({k: v for k, v in golden.items() if k != "header"})
    table = changed["warc"]
    kind, uri = table["columns"].index("type"), table["columns"].index("uri")
    victim = next(r for r in table["rows"] if r[kind] == "revisit")
    victim[kind] = "response"
    del changed["pages"]["rows"][0]
    lines = diff(golden, changed)
    assert lines[0] == (
        "[warc] %d rows in the golden, %d in this crawl: 1 changed, 0 only in the golden, 0 only in this crawl; "
        "changed columns: type x1" % (len(table["rows"]), len(table["rows"]))
    )
    assert lines[1].startswith(f"  changed round={victim[0]!r} uri={victim[uri]!r}: type: 'revisit' -> 'response'")
    assert lines[2].startswith("[pages] ") and "0 changed, 1 only in the golden, 0 only in this crawl" in lines[2]
    assert lines[3].startswith("  golden only: round=")
    assert len(lines) == 4

    changed["pages"]["columns"] = [c if c != "checksum" else "digest" for c in changed["pages"]["columns"]]
    lines = diff(golden, changed)
    assert "[pages] columns differ: missing ['checksum'], unexpected ['digest']" in lines
