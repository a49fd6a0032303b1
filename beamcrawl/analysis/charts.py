"""PNG charts of a crawl's rounds, from its round reports and its Parquet outputs.

``beamcrawl report OUT_DIR`` draws them, and the crawl loop has them drawn again after every
round into ``OUT/reports/``, in a process of its own (``python -m beamcrawl.analysis.charts
OUT``, started by ``pipelines/round_charts.py``; a failure there is logged, never fails the
round). Each chart is one file:

- ``throughput.png``: responses and pages per second per round;
- ``status_content.png``: the status-class mix per round and the content-type mix;
- ``politeness.png``: how long fetches waited for their host's (and IP's) turn;
- ``frontier.png``: the frontier's size after each round and the new URLs each round found;
- ``duplicates.png``: new content, exact copies and near copies per round;
- ``errors.png``: errors by stage per round (an empty-state chart when there were none).

What each round's Parquet says is summed once per round and kept beside the reports
(``reports/.charts/round-N.json``): a committed round's files never change, so later
reports read only the new round's columns, a batch of rows at a time (the drawing runs
beside the crawl: its memory must not grow with the round).
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections import Counter
from typing import Any, Iterable

from beamcrawl.core.runtime import files

log = logging.getLogger(__name__)

CHARTS = ("throughput", "status_content", "politeness", "frontier", "duplicates", "errors")
_REPORT = re.compile(r"round-(\d+)\.json$")
WAIT_BUCKETS_S = (0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx", "no response")
STAGE_ERRORS = re.compile(r"^([a-z_]+)/error$")


# --- data ----------------------------------------------------------------------------


def read_reports(out: str) -> list[dict[str, Any]]:
    """The crawl's round reports, in round order (unreadable ones skipped with a warning)."""
    reports = []
    for path in files.list_files(files.join(out, "reports")):
        if not _REPORT.search(path):
            continue
        try:
            with files.open_read(path) as fh:
                reports.append(json.loads(fh.read().decode("utf-8")))
        except (OSError, ValueError) as exc:
            log.warning("report: skipping %s (%s)", path, exc)
    return sorted(reports, key=lambda r: int(r.get("round", 0)))


def status_class(status: int | None, outcome: str | None) -> str | None:
    """``2xx`` … ``5xx`` for a response, ``no response`` for a failed fetch, None for a URL
    that was not fetched (robots-disallowed, deferred)."""
    if outcome == "fetched" and status is not None and 200 <= status < 600:
        return f"{status // 100}xx"
    if outcome == "error":
        return "no response"
    return None


def content_kind(content_type: str | None) -> str:
    """The media type of a Content-Type header (``text/html; charset=x`` → ``text/html``)."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    return kind or "(none)"


def wait_bucket(waited_ms: float) -> str:
    """The histogram bucket of a politeness wait, e.g. ``0.5-1s`` or ``>=60s``."""
    s = max(0.0, waited_ms / 1000.0)
    for lo, hi in zip(WAIT_BUCKETS_S, WAIT_BUCKETS_S[1:]):
        if s < hi:
            return f"{lo:g}-{hi:g}s"
    return f">={WAIT_BUCKETS_S[-1]:g}s"


def summarise_pages(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """What the charts need from one round's page events."""
    status: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    waits: Counter[str] = Counter()
    for row in rows:
        klass = status_class(row.get("status"), row.get("outcome"))
        if klass is None:
            continue
        status[klass] += 1
        if klass != "no response":
            kinds[content_kind(row.get("content_type"))] += 1
            waits[wait_bucket(row.get("waited_ms") or 0)] += 1
    return {"status": dict(status), "content_types": dict(kinds), "waits": dict(waits)}


# Rows read from a Parquet file at a time: a round's page events are summed batch by batch,
# never held as Python rows all at once (the drawing runs beside the next round).
READ_ROWS = 8192


def _round_pages(out: str, round_no: int) -> dict[str, Any]:
    import pyarrow.parquet as pq

    folder = files.join(out, "pages", f"round={round_no}")
    summary: dict[str, Counter[str]] = {"status": Counter(), "content_types": Counter(), "waits": Counter()}
    for path in files.list_files(folder):
        if not path.endswith(".parquet"):
            continue
        with files.open_read(path) as fh:
            batches = pq.ParquetFile(fh).iter_batches(
                batch_size=READ_ROWS, columns=["status", "outcome", "content_type", "waited_ms"]
            )
            for batch in batches:
                for key, counts in summarise_pages(batch.to_pylist()).items():
                    summary[key].update(counts)
    return {key: dict(counts) for key, counts in summary.items()}


def _round_errors(out: str, round_no: int) -> dict[str, int]:
    """Dead-letter rows of a round by stage (``errors/round=N/*.parquet``), where present."""
    import pyarrow.parquet as pq

    counts: Counter[str] = Counter()
    for path in files.list_files(files.join(out, "errors", f"round={round_no}")):
        if not path.endswith(".parquet"):
            continue
        with files.open_read(path) as fh:
            parquet = pq.ParquetFile(fh)
            if "stage" not in parquet.schema_arrow.names:
                counts["unknown"] += parquet.metadata.num_rows
                continue
            for batch in parquet.iter_batches(batch_size=READ_ROWS, columns=["stage"]):
                counts.update(str(s) for s in batch.column(0).to_pylist())
    return dict(counts)


def round_data(out: str, report: dict[str, Any]) -> dict[str, Any]:
    """One round's Parquet summary, from the cache beside the reports or read once."""
    round_no = int(report["round"])
    cache = files.join(out, "reports", ".charts", f"round-{round_no:06d}.json")
    try:
        with files.open_read(cache) as fh:
            return json.loads(fh.read().decode("utf-8"))
    except (OSError, ValueError):
        pass
    data = _round_pages(out, round_no)
    data["dead_letters"] = _round_errors(out, round_no)
    files.write_bytes(cache, json.dumps(data, sort_keys=True).encode())
    return data


def errors_by_stage(report: dict[str, Any], dead_letters: dict[str, int] | None = None) -> dict[str, int]:
    """A round's errors by stage: the dead-letter counters ``errors/<stage>/<type>`` where
    the round has them, else its dead-letter rows, else each stage's ``<stage>/error``."""
    metrics = report.get("metrics") or {}
    by_stage: Counter[str] = Counter()
    for key, value in metrics.items():
        parts = key.split("/")
        if parts[0] == "errors" and len(parts) >= 2 and isinstance(value, (int, float)):
            by_stage[parts[1]] += int(value)
    if by_stage:
        return dict(by_stage)
    if dead_letters:
        return dict(dead_letters)
    for key, value in metrics.items():
        m = STAGE_ERRORS.match(key)
        if m and m.group(1) != "freshness" and isinstance(value, (int, float)) and value:
            by_stage[m.group(1)] += int(value)
    return dict(by_stage)


# --- drawing -------------------------------------------------------------------------


def _figure(title: str, ncols: int = 1) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(5.5 * ncols, 3.6), dpi=90)
    fig.suptitle(title, fontsize=11)
    return fig, axes


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _counts(axis: Any) -> None:
    """Whole-number ticks on an axis of counts (a round with 1 error has no 0.5 error)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _stacked(ax: Any, rounds: list[int], series: dict[str, list[float]], colors: dict[str, str] | None = None) -> None:
    _counts(ax.yaxis)
    bottom = [0.0] * len(rounds)
    for name, values in series.items():
        ax.bar(rounds, values, bottom=bottom, label=name, color=(colors or {}).get(name))
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xlabel("round")
    ax.set_xticks(rounds)
    if series:
        ax.legend(fontsize=7, loc="upper left")


def chart_throughput(reports: list[dict[str, Any]]) -> bytes:
    fig, ax = _figure("Responses and pages/s per round")
    rounds = [int(r["round"]) for r in reports]
    ax.bar(rounds, [r.get("responses", 0) for r in reports], color="#4c72b0", label="responses")
    ax.set_ylabel("responses")
    _counts(ax.yaxis)
    ax.set_xlabel("round")
    ax.set_xticks(rounds)
    rate = ax.twinx()
    rate.plot(rounds, [r.get("pages_per_second", 0) for r in reports], color="#dd8452", marker="o", label="pages/s")
    rate.set_ylabel("pages/s (pipeline time)")
    rate.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()[0] + rate.get_legend_handles_labels()[0]
    ax.legend(handles, [h.get_label() for h in handles], fontsize=7, loc="upper left")
    return _png(fig)


def chart_status_content(reports: list[dict[str, Any]], data: list[dict[str, Any]]) -> bytes:
    fig, (left, right) = _figure("Status and content-type mix", ncols=2)
    rounds = [int(r["round"]) for r in reports]
    colors = {"2xx": "#55a868", "3xx": "#4c72b0", "4xx": "#dd8452", "5xx": "#c44e52", "no response": "#8c8c8c"}
    series = {k: [d["status"].get(k, 0) for d in data] for k in STATUS_CLASSES if any(d["status"].get(k) for d in data)}
    _stacked(left, rounds, series, colors)
    left.set_ylabel("fetches")
    left.set_title("status class per round", fontsize=9)
    kinds: Counter[str] = Counter()
    for d in data:
        kinds.update(d["content_types"])
    top = kinds.most_common(7)
    rest = sum(kinds.values()) - sum(n for _, n in top)
    if rest:
        top.append(("other", rest))
    if top:
        names, counts = zip(*reversed(top))
        right.barh(names, counts, color="#8172b3")
        _counts(right.xaxis)
        right.tick_params(axis="y", labelsize=7)
    else:
        right.text(0.5, 0.5, "no responses yet", ha="center", va="center", transform=right.transAxes)
    right.set_xlabel("responses (all rounds)")
    right.set_title("content types", fontsize=9)
    return _png(fig)


def chart_politeness(reports: list[dict[str, Any]], data: list[dict[str, Any]]) -> bytes:
    fig, (left, right) = _figure("Politeness waits (a fetch waiting for its host's turn)", ncols=2)
    buckets: Counter[str] = Counter()
    for d in data:
        buckets.update(d["waits"])
    names = [wait_bucket(lo * 1000) for lo in WAIT_BUCKETS_S]
    left.bar(range(len(names)), [buckets.get(n, 0) for n in names], color="#64b5cd")
    left.set_xticks(range(len(names)), names, rotation=40, fontsize=7)
    left.set_ylabel("fetches (all rounds)")
    _counts(left.yaxis)
    left.set_title("wait before each fetch", fontsize=9)
    rounds = [int(r["round"]) for r in reports]
    waits = [(r.get("metrics") or {}).get("fetch/politeness_wait_ms") or {} for r in reports]
    right.plot(rounds, [w.get("mean", 0) / 1000 for w in waits], marker="o", label="mean")
    right.plot(rounds, [w.get("max", 0) / 1000 for w in waits], marker="s", label="max")
    right.set_xticks(rounds)
    right.set_xlabel("round")
    right.set_ylabel("seconds")
    right.set_ylim(bottom=0)
    right.set_title("wait per round", fontsize=9)
    right.legend(fontsize=7)
    return _png(fig)


def chart_frontier(reports: list[dict[str, Any]]) -> bytes:
    fig, ax = _figure("Frontier size and new URLs per round")
    rounds = [int(r["round"]) for r in reports]
    ax.bar(rounds, [r.get("new_urls", 0) for r in reports], color="#55a868", label="new URLs found")
    ax.plot(
        rounds, [r.get("frontier_size", 0) for r in reports], color="#c44e52", marker="o", label="frontier after round"
    )
    ax.plot(
        rounds,
        [r.get("urls_due", 0) for r in reports],
        color="#4c72b0",
        marker=".",
        linestyle="--",
        label="URLs due at start",
    )
    ax.set_xticks(rounds)
    ax.set_xlabel("round")
    ax.set_ylabel("URLs")
    _counts(ax.yaxis)
    ax.legend(fontsize=7, loc="upper left")
    return _png(fig)


def chart_duplicates(reports: list[dict[str, Any]]) -> bytes:
    fig, ax = _figure("New content, exact and near duplicates per round")
    rounds = [int(r["round"]) for r in reports]
    series = {
        "new content": [r.get("new_content", 0) for r in reports],
        "exact copies": [r.get("exact_copies", 0) for r in reports],
        "near copies": [r.get("near_copies", 0) for r in reports],
    }
    _stacked(ax, rounds, series, {"new content": "#55a868", "exact copies": "#c44e52", "near copies": "#dd8452"})
    ax.set_ylabel("pages checked")
    return _png(fig)


def chart_errors(reports: list[dict[str, Any]], data: list[dict[str, Any]]) -> bytes:
    fig, ax = _figure("Errors by stage per round")
    rounds = [int(r["round"]) for r in reports]
    per_round = [errors_by_stage(r, d.get("dead_letters")) for r, d in zip(reports, data)]
    stages = sorted({s for counts in per_round for s, n in counts.items() if n})
    if not stages:
        ax.text(0.5, 0.55, "no errors", ha="center", va="center", fontsize=20, color="#55a868", transform=ax.transAxes)
        ax.text(
            0.5,
            0.35,
            f"in {len(reports)} round(s): no stage counted a failure",
            ha="center",
            va="center",
            fontsize=9,
            color="#555555",
            transform=ax.transAxes,
        )
        ax.set_xticks([])
        ax.set_yticks([])
        return _png(fig)
    _stacked(ax, rounds, {s: [c.get(s, 0) for c in per_round] for s in stages})
    ax.set_ylabel("errors (set aside, round went on)")
    return _png(fig)


def write_charts(out: str, dest: str | None = None) -> list[str]:
    """Draws every chart of the crawl in ``out`` into ``dest`` (default ``out/reports``);
    returns the paths written. Raises ValueError when the crawl has no round reports."""
    reports = read_reports(out)
    if not reports:
        raise ValueError(f"no round reports in {files.join(out, 'reports')} (has a round of this crawl finished?)")
    data = [round_data(out, r) for r in reports]
    dest = dest or files.join(out, "reports")
    drawn = {
        "throughput": chart_throughput(reports),
        "status_content": chart_status_content(reports, data),
        "politeness": chart_politeness(reports, data),
        "frontier": chart_frontier(reports),
        "duplicates": chart_duplicates(reports),
        "errors": chart_errors(reports, data),
    }
    paths = []
    for name in CHARTS:
        path = files.join(dest, f"{name}.png")
        files.write_bytes(path, drawn[name])
        paths.append(path)
    return paths


def charts_after_round(out: str) -> None:
    """The crawl loop's call after a round: draws the charts, logs one line on failure."""
    try:
        write_charts(out)
    except Exception as exc:  # charts are a view: a failure to draw never fails a round
        log.warning("report charts not drawn: %s", f"{type(exc).__name__}: {exc}".splitlines()[0])


if __name__ == "__main__":  # the crawl loop's drawing process (pipelines/round_charts.py)
    import sys
    import time

    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    _started = time.monotonic()
    charts_after_round(sys.argv[1])
    print(f"{time.monotonic() - _started:.3f}")  # what the drawing took: the crawl spaces the next by it
