"""The latest round's report in the Prometheus text exposition format (``reports/beamcrawl.prom``).

One file, replaced after every round (written under a temporary name, then renamed, so a
reader never sees half of it): point node_exporter's textfile collector at ``reports/``
(``--collector.textfile.directory``) and Prometheus scrapes the latest round's figures. A
file per round would repeat the same metric names, which the collector refuses as clashes;
each round's full report stays in ``reports/round-NNNNNN.json``. Everything is a gauge or a
summary holding *the latest round's* values; the round number is the ``beamcrawl_round``
gauge, not a label, so a crawl of a thousand rounds is still a handful of series.

Mapping, for a report as ``pipelines/launch.py`` writes it:

- every number at the top of the report → ``beamcrawl_round_<key>`` (gauge);
- ``files`` → ``beamcrawl_round_files{kind="warc"}`` (count of files committed);
- a Beam counter ``namespace/name`` → ``beamcrawl_<namespace>_<name>`` (gauge); a
  hierarchical name ``fetch/status/2xx`` becomes a label of its parent,
  ``beamcrawl_fetch_status{status="2xx"}``;
- a Beam distribution → a summary (``_count``, ``_sum``) plus ``_min`` and ``_max`` gauges.

No sample carries a timestamp (the textfile collector rejects them); the
``beamcrawl_round_started_timestamp_seconds`` gauge says when the round ran.
"""

from __future__ import annotations

import calendar
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LATEST", "render", "write_latest"]

# The file name in ``reports/``.
LATEST = "beamcrawl.prom"

PREFIX = "beamcrawl"

_HELP = {
    "round": "Number of the crawl round this file describes.",
    "seconds": "Wall time of the round, pipeline and commit, seconds.",
    "pipeline_seconds": "Wall time of the round's Beam job, seconds.",
    "round_window": "Configured fetch window of a round, seconds.",
    "hosts_planned": "Hosts given fetch slots this round.",
    "urls_due": "Frontier rows due at the start of the round.",
    "urls_assigned": "URLs given a fetch slot this round.",
    "responses": "HTTP responses received this round.",
    "robots_fetches": "robots.txt responses received this round.",
    "fetch_errors": "Requests that got no response (timeout, reset, connection refused).",
    "deferred": "Assigned URLs left for a later round (window ended, robots unknown).",
    "robots_disallowed": "URLs not fetched because robots.txt forbids them.",
    "usage_refused": "URLs not fetched because robots.txt usage preferences refuse a purpose of the crawl.",
    "usage_header_refused": "Pages not archived because their Content-Usage header refuses a purpose of the crawl.",
    "usage_bad_header": "Content-Usage response headers that did not parse (they state nothing).",
    "usage_bad_robots_lines": "Content-Signal and Content-Usage lines of fetched robots.txt files that state nothing.",
    "refused": "Requests the address policy refused before any connection (nothing archived).",
    "operator_urls_deferred": "Seeds and submitted URLs deferred by the domain page budget.",
    "bytes": "Response bytes received (as transferred).",
    "links_found": "Links found on the round's pages.",
    "new_urls": "Never-seen URLs queued this round.",
    "not_modified": "Revisits answered 304 Not Modified (no body transferred).",
    "changed": "Revisits that found the content changed.",
    "unchanged": "Revisits that found the content unchanged (304 or the same checksum).",
    "dropped": "URLs dropped after repeated 404/410 answers.",
    "sitemaps_read": "Sitemaps and feeds read this round.",
    "errors": "Elements set aside this round (dead letters in errors/; by stage: beamcrawl_errors_<stage>).",
    "frontier_size": "Frontier rows left after the round.",
    "pages_per_second": "Responses per second of pipeline time.",
}

_NAME_BAD = re.compile(r"[^a-zA-Z0-9_:]")


def _name(*parts: str) -> str:
    text = "_".join(p for p in parts if p)
    text = _NAME_BAD.sub("_", text)
    return text if re.match(r"[a-zA-Z_:]", text) else f"_{text}"


def _label_name(text: str) -> str:
    name = re.sub(r"[^a-zA-Z0-9_]", "_", text) or "kind"
    if name[0].isdigit() or name.startswith("__"):
        name = f"l_{name}"
    return name


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


@dataclass
class _Family:
    name: str
    kind: str  # gauge | summary
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"# HELP {self.name} {_help(self.help)}", f"# TYPE {self.name} {self.kind}"]
        for suffix, labels, value in sorted(self.samples, key=lambda s: (s[0], sorted(s[1].items()))):
            label_text = ",".join(f'{k}="{_label_value(v)}"' for k, v in sorted(labels.items()))
            out.append(
                f"{self.name}{suffix}{{{label_text}}} {_number(value)}"
                if label_text
                else f"{self.name}{suffix} {_number(value)}"
            )
        return out


class _Families:
    """Families by name; a name asked for with two types gets the later one renamed."""

    def __init__(self) -> None:
        self.by_name: dict[str, _Family] = {}

    def get(self, name: str, kind: str, help_text: str) -> _Family:
        family = self.by_name.get(name)
        if family is not None and family.kind != kind:
            return self.get(f"{name}_{kind}", kind, help_text)
        if family is None:
            family = self.by_name[name] = _Family(name, kind, help_text)
        return family

    def text(self) -> str:
        lines: list[str] = []
        for name in sorted(self.by_name):
            lines.extend(self.by_name[name].lines())
        return "\n".join(lines) + "\n"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _started_epoch(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def _beam_metric(families: _Families, key: str, value: Any) -> None:
    namespace, _, name = key.partition("/")
    parent, _, leaf = name.rpartition("/")
    source = f"Beam metric {key}"
    if _is_number(value):
        if parent:  # fetch/status/2xx → beamcrawl_fetch_status{status="2xx"}
            label = _label_name(parent.rsplit("/", 1)[-1])
            family = families.get(
                _name(PREFIX, namespace, parent), "gauge", f"{source.rsplit('/', 1)[0]}/* this round."
            )
            family.samples.append(("", {label: leaf}, value))
        else:
            families.get(_name(PREFIX, namespace, name), "gauge", f"{source} this round.").samples.append(
                ("", {}, value)
            )
    elif isinstance(value, dict) and _is_number(value.get("count")) and _is_number(value.get("sum")):
        base = _name(PREFIX, namespace, name)
        summary = families.get(base, "summary", f"{source} (distribution) this round.")
        summary.samples.append(("_count", {}, value["count"]))
        summary.samples.append(("_sum", {}, value["sum"]))
        for stat in ("min", "max"):
            if _is_number(value.get(stat)):
                families.get(f"{base}_{stat}", "gauge", f"{source}: {stat} this round.").samples.append(
                    ("", {}, value[stat])
                )


def render(report: dict[str, Any]) -> str:
    """The report as Prometheus text exposition format (version 0.0.4).

    Args:
        report: A round report as ``pipelines/launch.py`` writes it to JSON.

    Returns:
        The text, ending with a newline; families sorted by name, so equal reports render
        equal text.
    """
    families = _Families()
    for key, value in report.items():
        if key in ("metrics", "files"):
            continue
        if _is_number(value):
            name = _name(PREFIX, key) if key == "round" else _name(PREFIX, "round", key)
            families.get(name, "gauge", _HELP.get(key, f"Round report field {key}.")).samples.append(("", {}, value))
    started = _started_epoch(report.get("started_at"))
    if started is not None:
        families.get(
            _name(PREFIX, "round_started_timestamp_seconds"), "gauge", "When the round started (Unix time)."
        ).samples.append(("", {}, started))
    files = report.get("files")
    if isinstance(files, dict):
        family = families.get(_name(PREFIX, "round_files"), "gauge", "Files the round committed, by kind.")
        for kind, paths in sorted(files.items()):
            family.samples.append(("", {"kind": str(kind)}, len(paths) if isinstance(paths, (list, tuple)) else 0))
    metrics = report.get("metrics")
    if isinstance(metrics, dict):
        for key in sorted(metrics):
            _beam_metric(families, key, metrics[key])
    return families.text()


def write_latest(report: dict[str, Any], reports_dir: str) -> str:
    """Replaces ``reports_dir/beamcrawl.prom`` with ``render(report)``, atomically (a
    temporary name, then a rename: readers see the old file or the new one, never half);
    returns the path."""
    from beamcrawl.core.runtime import files

    path = f"{reports_dir.rstrip('/')}/{LATEST}"
    files.write_bytes(path, render(report).encode("utf-8"))
    return path
