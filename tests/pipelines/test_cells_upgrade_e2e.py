"""End to end, an existing crawl keeps reading: a store whose hot rows are JSON, as every
version before the binary cells (``schemas/cells.py``) wrote them, is crawled on by this one,
on the embedded store and on the Bigtable emulator.

One round runs through the real CLI on simweb (mirror hosts among its hosts, so the content
tables fill); then every binary cell of the frontier, the seen set's discovery,
fetch-outcome and revisit cells, the content rows and the simhash rows is rewritten into the JSON the earlier code wrote for it
(byte for byte, by that code's own encoders, kept in this test). A second round runs on that
store, and:

- every frontier row is read (no dead letter, nothing left unreadable in the frontier) and
  the round fetches the URLs the first round queued;
- no URL the first round knew is queued again, and its JSON discovery cell is left as it
  was (a URL wrongly taken as unseen would be written again, in binary);
- no content row of the first round is written again (a checksum wrongly taken as new
  would be);
- the URLs it fetches get their outcome as one binary cell over the JSON cells of before;
- the state export reads every seen-set row of both formats.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from beamcrawl.schemas import cells as cellfmt
from beamcrawl.schemas.records import (
    JSON_CELL,
    OUTCOME_CELL,
    OUTCOME_FIELDS,
    QUEUED_CELL,
    REVISIT_CELL,
    FrontierEntry,
    UrlState,
    _encode,
)
from beamcrawl.simweb.testing import running_simweb
from beamcrawl.state.parquet_export import url_row
from beamcrawl.stores.base import Mutation, open_store
from beamcrawl.state.content_rows import CONTENT_CELL, ContentRecord, simhash_value

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _json_frontier(raw: bytes) -> bytes:
    """Today's ``FrontierEntry.to_cells`` before the binary cells: the entry's dict as JSON."""
    return _encode(FrontierEntry.from_cells({JSON_CELL: raw}))[JSON_CELL]


def _json_queued(raw: bytes) -> bytes:
    return json.dumps(list(cellfmt.decode_queued(raw)), separators=(",", ":")).encode()


def _json_content(raw: bytes) -> bytes:
    record = ContentRecord.from_cells({CONTENT_CELL: raw})
    return json.dumps(dataclasses.asdict(record), separators=(",", ":")).encode()


def _json_outcome(raw: bytes) -> dict[str, bytes]:
    """A fetch's outcome as the cells of before: one ``u:<field>`` JSON cell each."""
    return UrlState(**dict(zip(OUTCOME_FIELDS, cellfmt.decode_outcome(raw)))).to_cells(only=OUTCOME_FIELDS)


def _json_simhash(raw: bytes) -> bytes:
    url, round_no = simhash_value(raw)
    value = round_no if url is None else {"url": url, "round": round_no}
    return json.dumps(value, separators=(",", ":")).encode()


_TO_JSON = {
    "frontier": (JSON_CELL, _json_frontier),
    "urls": (QUEUED_CELL, _json_queued),
    "content": (CONTENT_CELL, _json_content),
}


def _rewrite_as_json(store_uri: str) -> collections.Counter[str]:
    """Every binary cell of the four tables rewritten as the JSON of before; counts per table."""
    counts: collections.Counter[str] = collections.Counter()
    with open_store(store_uri) as store:
        for table in ("frontier", "urls", "content", "simhash"):
            muts = []
            for key, row in store.read_range(table):
                new, outcome = {}, {}
                for column, raw in row.items():
                    if not cellfmt.is_binary(raw):
                        continue
                    if column == OUTCOME_CELL:  # its fields had a cell each: the row is rewritten
                        outcome = _json_outcome(raw)
                        continue
                    if column == REVISIT_CELL:
                        counts["revisits"] += 1
                        new[column] = json.dumps(cellfmt.decode_revisit(raw)).encode()
                        continue
                    if table == "simhash":
                        new[column] = _json_simhash(raw)
                    else:
                        name, convert = _TO_JSON[table]
                        assert column == name, (table, column)
                        new[column] = convert(raw)
                counts[table] += bool(new)
                if outcome:
                    counts["outcomes"] += 1
                    kept = {c: v for c, v in row.items() if c != OUTCOME_CELL}
                    muts.append(Mutation(key=key, cells={**kept, **new, **outcome}, delete=True))
                elif new:
                    muts.append(Mutation.set(key, new))
            store.mutate(table, muts)
            assert not any(cellfmt.is_binary(v) for _, row in store.read_range(table) for v in row.values())
    return counts


def _crawl(work: Path, out: Path, store: str, seeds: Path) -> dict:
    cmd = [
        sys.executable, "-m", "beamcrawl.cli.main", "crawl",
        "--seeds", str(seeds), "--out", str(out), "--store", store, "--rounds", "1",
        "--resolve", "*=127.0.0.1", "--allow-private-networks",
        "--min-delay", "0.2", "--round-window", "4", "--runner", "FnApiRunner",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reports = sorted((out / "reports").glob("round-*.json"))
    return json.loads(reports[-1].read_text())


def test_a_store_written_as_json_is_crawled_on(tmp_path: Path, both_stores: str) -> None:
    out = tmp_path / "out"
    store_uri = both_stores  # the embedded store in ``out``, then a scratch one on the emulator
    with running_simweb(str(tmp_path), hosts=12, seed=5, pages_per_host=8, copy_hosts_from=0) as web:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.base_url(h) for h in web.hosts) + "\n")
        first = _crawl(tmp_path, out, store_uri, seeds)
        assert first["errors"] == 0
        converted = _rewrite_as_json(store_uri)
        assert all(converted[t] > 0 for t in ("frontier", "urls", "outcomes", "revisits", "content", "simhash")), (
            converted
        )
        with open_store(store_uri) as store:
            queued = {FrontierEntry.from_cells(c).url for _, c in store.read_range("frontier")}
            known = {k: dict(c) for k, c in store.read_range("urls")}
            content = {k: dict(c) for k, c in store.read_range("content")}
        second = _crawl(tmp_path, out, store_uri, seeds)

    assert second["errors"] == 0 and second["metrics"].get("select/bad_rows", 0) == 0
    assert second["urls_due"] >= len(queued) // 2 and second["responses"] > 0
    with open_store(store_uri) as store:
        frontier = [FrontierEntry.from_cells(c) for _, c in store.read_range("frontier")]
        urls = {k: dict(c) for k, c in store.read_range("urls")}
        content_after = {k: dict(c) for k, c in store.read_range("content")}
    # The second round worked through what the first queued (JSON rows, read by select).
    fetched_urls = {UrlState.from_cells(c).url for c in urls.values() if OUTCOME_CELL in c}
    assert fetched_urls & queued
    assert all(cellfmt.is_binary(c[OUTCOME_CELL]) for c in urls.values() if OUTCOME_CELL in c)
    # The first round's outcomes, JSON cells of before, read as they were written.
    for key, cells in known.items():
        if "u:state" in cells and OUTCOME_CELL not in urls[key]:
            assert UrlState.from_cells(urls[key]) == UrlState.from_cells(cells)
    # What the first round knew stays known: its JSON discovery cells untouched, no URL twice.
    for key, cells in known.items():
        if QUEUED_CELL in cells:
            assert urls[key][QUEUED_CELL] == cells[QUEUED_CELL]
    counts = collections.Counter(e.url for e in frontier if e.source != "revisit")
    assert not [u for u, n in counts.items() if n > 1]
    # New URLs of the second round are binary; both formats read back alike.
    assert any(cellfmt.is_binary(c.get(QUEUED_CELL, b"{")) for k, c in urls.items() if k not in known)
    # The content rows of the first round were found, not written again as new content.
    for key, cells in content.items():
        assert content_after[key] == cells
    assert all(url_row(k, c) is not None for k, c in urls.items() if {"u:url", QUEUED_CELL, OUTCOME_CELL} & set(c))
