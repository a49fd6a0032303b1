"""A crawl's outputs as a deterministic summary: what two crawls of the same web must share.

:func:`summarize` reads a crawl's output folder (WARC files, ``pages/`` and ``links/``
Parquet, and the state store under it) and returns a JSON-serialisable dict of sorted rows.
Two crawls of the same bytes with the same settings give equal summaries whatever the clock,
the machine's load or the order in which pages came back; :func:`diff` says readably where two
summaries part.

What is left out is what differs between two runs of the same code (checked by crawling
twice and comparing; :data:`EXCLUDED` says why for each):

- wall-clock times and durations (``fetched_at``, ``elapsed_ms``, ``waited_ms``,
  ``first_seen``, ``WARC-Date``, ``WARC-Refers-To-Date``, revisit schedule times, the
  change-rate estimate that follows from them, frontier due times);
- names that are random per run: WARC record ids, WARC file names and offsets. A page
  event's ``blob`` is kept as what it points at: the type and target of the record at that
  file and offset (or null);
- digests of whole WARC blocks, which hold the server's ``Date`` header (payload digests are
  kept), and ``warcinfo`` records, one per file (how many files a round writes is the
  runner's bundling).

Sections (each a sorted list; tables as ``{"columns": [...], "rows": [[...], ...]}``):

- ``warc``: one entry per WARC record of every committed file: round, WARC-Type, target URI,
  HTTP status, payload digest, WARC-Profile, WARC-Refers-To-Target-URI, WARC-Truncated;
- ``pages`` and ``links``: every Parquet row with the round of its partition, every stable
  column (the dedup decisions ``duplicate_of`` / ``duplicate_kind`` / ``duplicate_distance``
  among them);
- ``cdxj``: one entry per CDXJ index line: round, SURT key, URL, MIME, status, digest,
  redirect, truncation (any other field under ``extra``), and the record the line points at;
- ``urls``: the seen set, as ``beamcrawl export`` writes it, plus the deterministic part of
  each URL's revisit state (validators, digest and checksum held, visits, changes, outcomes);
- ``hosts``: the host records, as ``beamcrawl export`` writes them, without times and delays;
- ``frontier``: the queued URLs and what they are queued as.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable

import pyarrow.parquet as pq
from warcio.archiveiterator import ArchiveIterator

from beamcrawl.state.parquet_export import host_row, scan_chunks, url_row
from beamcrawl.schemas.records import FrontierEntry, UrlState
from beamcrawl.stores.base import open_store

__all__ = ["EXCLUDED", "SECTIONS", "diff", "summarize"]

SECTIONS = ("warc", "cdxj", "pages", "links", "urls", "hosts", "frontier")

# Column or field -> why it is not part of the summary (it differs between two runs).
EXCLUDED: dict[str, dict[str, str]] = {
    "warc": {
        "WARC-Date": "wall clock",
        "WARC-Record-ID": "random per run",
        "WARC-Refers-To-Date": "wall clock (the referred capture's WARC-Date)",
        "WARC-Refers-To": "the referred capture's record id, random per run",
        "WARC-Block-Digest": "the block holds the server's Date header",
        "WARC-Concurrent-To / WARC-Warcinfo-ID": "record ids, random per run",
        "warcinfo records": "one per WARC file: how many files a round writes is the runner's bundling, "
        "not the crawl's content",
    },
    "pages": {
        "fetched_at": "wall clock",
        "elapsed_ms": "timing",
        "waited_ms": "timing",
        "blob": "file name random per run, offset depends on record order: kept as the type and target "
        "of the record it points at (blob_record)",
    },
    "cdxj": {
        "timestamp": "wall clock (the record's WARC-Date)",
        "length": "the record's compressed length: its headers hold the dates and record ids",
        "filename / offset": "random file name, order of records: kept as the type and target of the record "
        "they point at (record)",
    },
    "links": {"fetched_at": "wall clock"},
    "urls": {
        "first_seen": "wall clock",
        "fetched_at": "wall clock",
        "revisit.lam": "change-rate estimate from the intervals between visits (timing)",
        "revisit.history": "intervals between visits (timing): only each visit's changed flag is kept",
        "revisit.checked_at / changed_at / stored_at / next_due": "wall clock",
    },
    "hosts": {
        "delay": "adaptive: ten times the last response time when that is above --min-delay (timing)",
        "last_response_time": "timing",
        "last_fetch_end / not_before / robots_fetched_at / robots_failing_since": "wall clock",
    },
    "frontier": {
        "due_ms": "wall clock",
        "also_keys": "frontier row keys, which start with the due time",
        "revisit": "the URL's revisit state, summarised under urls",
    },
}

PAGES_DROPPED = ("fetched_at", "elapsed_ms", "waited_ms", "blob")
CDXJ_DROPPED = ("length", "offset", "filename")
CDXJ_COLUMNS = ["round", "urlkey", "url", "mime", "status", "digest", "redirect", "truncated", "extra", "record"]
HOSTS_DROPPED = (
    "delay",
    "last_response_time",
    "last_fetch_end",
    "not_before",
    "robots_fetched_at",
    "robots_failing_since",
)
LINKS_DROPPED = ("fetched_at",)
URLS_DROPPED = ("first_seen", "fetched_at")
REVISIT_KEPT = (
    "importance", "prior_rate", "status", "etag", "last_modified", "checksum", "simhash", "visits", "changes",
    "outcomes", "digest", "misses", "errors", "moved_to", "lastmod_agree", "lastmod_disagree",
)  # fmt: skip
# priority is kept: with --revisit-policy uniform a revisit's is a constant, a new URL's its
# importance (in-links, source, depth); the adaptive policy would make it time-dependent.
FRONTIER_KEPT = (
    "url", "fp", "host", "priority", "depth", "source", "inlinks", "deferrals", "kind", "hops", "reason", "lastmod",
)  # fmt: skip


def summarize(out: str | Path, store: str | None = None) -> dict[str, Any]:
    """Summarise a crawl's output folder.

    Args:
        out: The crawl's ``--out`` folder.
        store: Its ``--store`` URI; None for the embedded store under ``out``.

    Returns:
        ``{section: ...}`` for each of :data:`SECTIONS`: plain JSON values, rows sorted.
    """
    out = Path(out)
    records, at_offset = _warc_records(out)
    with open_store(store or str(out)) as s:
        urls = _urls(row for chunk in scan_chunks(s, "urls") for row in chunk)
        hosts = _hosts(row for chunk in scan_chunks(s, "hosts") for row in chunk)
        frontier = _frontier(row for chunk in scan_chunks(s, "frontier") for row in chunk)
    return {
        "warc": records,
        "cdxj": _cdxj(out, at_offset),
        "pages": _table(out, "pages", PAGES_DROPPED, lambda row: _page_extra(row, at_offset)),
        "links": _table(out, "links", LINKS_DROPPED),
        "urls": urls,
        "hosts": hosts,
        "frontier": frontier,
    }


# --- WARC ---------------------------------------------------------------------------------

WARC_COLUMNS = ["round", "type", "uri", "status", "payload_digest", "profile", "refers_to_uri", "truncated"]


def _warc_files(out: Path) -> list[tuple[int, str]]:
    files = []
    for path in glob.glob(str(out / "warc" / "round=*" / "*.warc.gz")):
        files.append((_round_of(path), path))
    return sorted(files)


def _round_of(path: str) -> int:
    return int(Path(path).parent.name.split("=", 1)[1])


def _warc_records(out: Path) -> tuple[dict[str, Any], dict[tuple[str, int], list[Any]]]:
    """The records of every committed WARC file, and (file relative to out, offset) -> record."""
    rows: list[list[Any]] = []
    at_offset: dict[tuple[str, int], list[Any]] = {}
    for round_no, path in _warc_files(out):
        rel = str(Path(path).relative_to(out))
        with open(path, "rb") as fh:
            it = ArchiveIterator(fh)
            for rec in it:
                if rec.rec_type == "warcinfo":
                    continue
                h = rec.rec_headers
                status = None
                if rec.http_headers is not None and rec.rec_type in ("response", "revisit"):
                    code = rec.http_headers.get_statuscode()
                    status = int(code) if code and code.isdigit() else code
                row = [
                    round_no,
                    rec.rec_type,
                    h.get_header("WARC-Target-URI"),
                    status,
                    h.get_header("WARC-Payload-Digest"),
                    h.get_header("WARC-Profile"),
                    h.get_header("WARC-Refers-To-Target-URI"),
                    h.get_header("WARC-Truncated"),
                ]
                rows.append(row)
                at_offset[(rel, it.get_record_offset())] = row
    return {"columns": WARC_COLUMNS, "rows": _sorted(rows)}, at_offset


def _pointed(at_offset: dict[tuple[str, int], list[Any]], rel: str, offset: str) -> str:
    """``"<type> <target>"`` of the record at a file and offset (or why there is none)."""
    rec = at_offset.get((rel, int(offset))) if offset.isdigit() else None
    return f"{rec[1]} {rec[2]}" if rec is not None else "no record there"


def _cdxj(out: Path, at_offset: dict[tuple[str, int], list[Any]]) -> dict[str, Any]:
    rows: list[list[Any]] = []
    for path in sorted(glob.glob(str(out / "warc" / "round=*" / "*.cdxj"))):
        round_no = _round_of(path)
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                urlkey, _timestamp, fields_json = line.rstrip("\n").split(" ", 2)
                fields = json.loads(fields_json)
                record = _pointed(at_offset, fields.get("filename", ""), str(fields.get("offset", "")))
                for name in CDXJ_DROPPED:
                    fields.pop(name, None)
                named = {c: fields.pop(c, None) for c in CDXJ_COLUMNS[2:-2]}
                row = {"round": round_no, "urlkey": urlkey, **named, "extra": fields or None, "record": record}
                rows.append([_plain(row[c]) for c in CDXJ_COLUMNS])
    return {"columns": CDXJ_COLUMNS, "rows": _sorted(rows)}


# --- Parquet ------------------------------------------------------------------------------


def _page_extra(row: dict[str, Any], at_offset: dict[tuple[str, int], list[Any]]) -> dict[str, Any]:
    """A page event's blob as the record it points at."""
    blob = row.get("blob")
    if not blob:
        return {"blob_record": None}
    rel, _, offset = blob.rpartition("@")
    return {"blob_record": _pointed(at_offset, rel, offset)}


def _table(out: Path, kind: str, dropped: Iterable[str], extra: Any = None) -> dict[str, Any]:
    columns: list[str] | None = None
    rows: list[list[Any]] = []
    for path in sorted(glob.glob(str(out / kind / "round=*" / "*.parquet"))):
        round_no = _round_of(path)
        for row in pq.read_table(path).to_pylist():
            if extra is not None:
                row.update(extra(row))
            for name in dropped:
                row.pop(name, None)
            if columns is None:
                columns = ["round", *sorted(row)]
            row["round"] = round_no
            if sorted(row) != sorted(columns):
                raise ValueError(f"{path}: columns {sorted(row)} differ from {columns}")
            rows.append([_plain(row[c]) for c in columns])
    return {"columns": columns or [], "rows": _sorted(rows)}


# --- state --------------------------------------------------------------------------------


def _urls(store_rows: Iterable[tuple[bytes, dict[str, bytes]]]) -> dict[str, Any]:
    columns: list[str] | None = None
    rows = []
    for key, cells in store_rows:
        exported = url_row(key, cells)
        if exported is None:
            continue
        for name in URLS_DROPPED:
            exported.pop(name, None)
        revisit = UrlState.from_cells(cells).revisit or {}
        for name in REVISIT_KEPT:
            exported[f"revisit.{name}"] = revisit.get(name)
        exported["revisit.changed_flags"] = [int(h[1]) for h in revisit.get("history") or []]
        if columns is None:
            columns = sorted(exported)
        rows.append([_plain(exported.get(c)) for c in columns])
    return {"columns": columns or [], "rows": _sorted(rows)}


def _hosts(store_rows: Iterable[tuple[bytes, dict[str, bytes]]]) -> dict[str, Any]:
    columns: list[str] | None = None
    rows = []
    for key, cells in store_rows:
        exported = host_row(key, cells)
        if exported is None:
            continue
        for name in HOSTS_DROPPED:
            exported.pop(name, None)
        if columns is None:
            columns = sorted(exported)
        rows.append([_plain(exported.get(c)) for c in columns])
    return {"columns": columns or [], "rows": _sorted(rows)}


def _frontier(store_rows: Iterable[tuple[bytes, dict[str, bytes]]]) -> dict[str, Any]:
    rows = []
    for _, cells in store_rows:
        entry = FrontierEntry.from_cells(cells)
        rows.append([_plain(getattr(entry, name)) for name in FRONTIER_KEPT])
    return {"columns": list(FRONTIER_KEPT), "rows": _sorted(rows)}


# --- values -------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A JSON value for a cell (floats rounded, so that a value read back compares equal)."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in sorted(value.items())}
    return value


def _sorted(rows: list[list[Any]]) -> list[list[Any]]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


# --- comparing ----------------------------------------------------------------------------

# The columns that name a row for the diff: rows of a section that differ and share these are
# shown as the columns that changed.
ROW_KEYS: dict[str, tuple[str, ...]] = {
    "warc": ("round", "uri"),
    "cdxj": ("round", "url"),
    "hosts": ("host",),
    "pages": ("round", "url"),
    "links": ("round", "src", "dst"),
    "urls": ("url",),
    "frontier": ("url",),
}


def diff(expected: dict[str, Any], actual: dict[str, Any], limit: int = 8) -> list[str]:
    """Where two summaries part, as readable lines (empty when they are equal).

    Per section: a change of columns; the row counts and, per column, how many rows changed
    it; then the first ``limit`` rows changed in place (same key, :data:`ROW_KEYS`), shown as
    ``column: golden -> crawl``, and the first ``limit`` rows only in one summary or the other.
    """
    lines: list[str] = []
    for section in SECTIONS:
        exp, act = expected.get(section), actual.get(section)
        if exp == act:
            continue
        if exp is None or act is None:
            lines.append(f"[{section}] missing from the {'golden' if exp is None else 'crawl'}")
            continue
        if exp["columns"] != act["columns"]:
            gone = [c for c in exp["columns"] if c not in act["columns"]]
            new = [c for c in act["columns"] if c not in exp["columns"]]
            lines.append(f"[{section}] columns differ: missing {gone}, unexpected {new}")
            common = [c for c in exp["columns"] if c in act["columns"]]
            exp = _project(exp, common)
            act = _project(act, common)
        lines.extend(_diff_rows(section, exp["columns"], exp["rows"], act["rows"], limit))
    return lines


def _project(table: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    idx = [table["columns"].index(c) for c in columns]
    return {"columns": columns, "rows": _sorted([[r[i] for i in idx] for r in table["rows"]])}


def _diff_rows(section: str, columns: list[str], exp: list[list[Any]], act: list[list[Any]], limit: int) -> list[str]:
    e = Counter(json.dumps(r) for r in exp)
    a = Counter(json.dumps(r) for r in act)
    only_exp = [json.loads(r) for r in sorted((e - a).elements())]
    only_act = [json.loads(r) for r in sorted((a - e).elements())]
    if not only_exp and not only_act:
        return []
    key_idx = [columns.index(c) for c in ROW_KEYS.get(section, ()) if c in columns]

    def key(row: list[Any]) -> str:
        return json.dumps([row[i] for i in key_idx])

    by_key_exp: dict[str, list[list[Any]]] = defaultdict(list)
    by_key_act: dict[str, list[list[Any]]] = defaultdict(list)
    for row in only_exp:
        by_key_exp[key(row)].append(row)
    for row in only_act:
        by_key_act[key(row)].append(row)
    # One row each side under one key: the same row, changed in place.
    changed = [
        (by_key_exp[k][0], by_key_act[k][0])
        for k in sorted(by_key_exp)
        if key_idx and len(by_key_exp[k]) == 1 and len(by_key_act.get(k, ())) == 1
    ]
    paired = {key(old) for old, _ in changed}
    gone = [r for r in only_exp if key(r) not in paired]
    new = [r for r in only_act if key(r) not in paired]
    per_column = Counter(c for old, cur in changed for c, x, y in zip(columns, old, cur) if x != y)
    lines = [
        f"[{section}] {len(exp)} rows in the golden, {len(act)} in this crawl: {len(changed)} changed, "
        f"{len(gone)} only in the golden, {len(new)} only in this crawl"
        + (f"; changed columns: {', '.join(f'{c} x{n}' for c, n in per_column.most_common())}" if per_column else "")
    ]
    for old, cur in changed[:limit]:
        named = " ".join(f"{columns[i]}={old[i]!r}" for i in key_idx)
        deltas = "; ".join(f"{c}: {x!r} -> {y!r}" for c, x, y in zip(columns, old, cur) if x != y)
        lines.append(f"  changed {named}: {deltas}")
    if len(changed) > limit:
        lines.append(f"  changed ... and {len(changed) - limit} more")
    for label, rows in (("golden only", gone), ("crawl only ", new)):
        for row in rows[:limit]:
            lines.append(f"  {label}: " + ", ".join(f"{c}={v!r}" for c, v in zip(columns, row) if v is not None))
        if len(rows) > limit:
            lines.append(f"  {label}: ... and {len(rows) - limit} more")
    return lines
