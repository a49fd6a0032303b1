"""The one-screen console summary of a round, from its report."""

from __future__ import annotations

from typing import Any


def summary(report: dict[str, Any]) -> str:
    """One screen about a round, each figure with what it counts."""
    m = report["metrics"]
    status = {k.split("/")[-1]: v for k, v in m.items() if k.startswith("fetch/status/")}
    robots, sitemaps = report["robots_fetches"], report.get("sitemaps_read", 0)
    lines = [
        f"round {report['round']}: {report['responses']} responses in {report['pipeline_seconds']:.1f}s "
        f"({report['pages_per_second']:.1f}/s) from {report['hosts_planned']} hosts",
        # "responses" is every HTTP answer, whatever was asked for.
        f"  responses: {max(report['responses'] - robots - sitemaps, 0)} pages, {robots} robots.txt, "
        f"{sitemaps} sitemaps and feeds; status {' '.join(f'{k}={v}' for k, v in sorted(status.items())) or '-'}; "
        f"{report['bytes'] / 1e6:.2f} MB",
        f"  due {report['urls_due']}, assigned {report['urls_assigned']} (a host gets at most window / delay; "
        f"the rest stay queued), robots-disallowed {report['robots_disallowed']}"
        + (
            f" ({report['robots_capped']} of them by a robots.txt too costly to check, refused as the polite answer)"
            if report.get("robots_capped")
            else ""
        ),
        f"  hosts given no slots (their URLs stay queued): {_held(m)}",
        f"  deferred {report['deferred']} (assigned but left queued for the next round: "
        f"{_breakdown(m, 'fetch/deferred_reason/')})",
        f"  errors {report['fetch_errors']} (requests that got no HTTP answer; retried later with back-off: "
        f"{_breakdown(m, 'fetch/error_kind/')})",
        f"  refused by address policy {report.get('refused', 0)} (never connected: link-local always, loopback "
        f"and private addresses without --allow-private-networks)",
        f"  links found {report['links_found']}, refused by shape {report['links_refused_by_shape']}, "
        f"new URLs {report['new_urls']}, frontier now "
        f"{'' if report.get('frontier_size_exact', True) else 'about '}{report['frontier_size']}",
        f"  deferred by budgets {report['deferred_by_budgets']} (queued URLs set aside, due again later, never "
        f"deleted: over the domain's page budget {m.get('budgets/urls_over_budget', 0)}, over a host's or "
        f"domain's cap on new URLs or host names {m.get('budgets/urls_new_host_capped', 0)}; seeds and submissions "
        f"among them {report.get('operator_urls_deferred', 0)})",
        f"  revisits: changed {report.get('changed', 0)}, unchanged {report.get('unchanged', 0)} "
        f"({report.get('not_modified', 0)} by 304), dropped {report.get('dropped', 0)}",
    ]
    refused = report.get("refusals") or {}
    recorded, cleared = refused.get("recorded") or {}, refused.get("cleared") or {}
    if any(recorded.values()) or any(cleared.values()) or refused.get("hosts_in_force"):
        lines.append(
            f"  hosts that refused us: {sum(recorded.values())} this round ({_kinds(recorded)}), "
            f"{refused.get('hosts_in_force', 0)} held by a refusal in force ({refused.get('urls_held', 0)} URLs "
            f"left queued), {sum(cleared.values())} cleared (beamcrawl hosts show HOST; hosts release HOST)"
        )
    if report.get("purposes"):
        lines.append(
            f"  purposes {','.join(report['purposes'])}: refused by the sites' usage preferences "
            f"{report.get('usage_refused', 0)} not fetched (robots.txt), {report.get('usage_header_refused', 0)} "
            f"fetched but not archived (Content-Usage header); unreadable: headers {report.get('usage_bad_header', 0)}, "
            f"robots.txt lines {report.get('usage_bad_robots_lines', 0)}"
        )
    if report.get("errors") or report.get("quarantined"):
        by_stage = " ".join(f"{k}={v}" for k, v in sorted(report.get("errors_by_stage", {}).items()))
        lines.append(
            f"  set aside {report.get('errors', 0)} (errors/: {by_stage or '-'}); quarantined now {len(report.get('quarantined', []))}"
        )
    compacted = report.get("compacted") or {}
    for kind, paths in sorted(report["files"].items()):
        merged = compacted.get(kind) or {}
        note = f" (merged from {merged['before']} staged)" if merged.get("before", 0) > merged.get("after", 0) else ""
        lines.append(f"  {kind}: {len(paths)} file(s){note}")
    return "\n".join(lines)


# Why a host got no slots (transforms/assign_slots.py's hold reasons), as the summary names it.
HOLD_REASONS = (
    ("blocked", "blocked by operator policy"),
    ("paused", "paused by operator policy"),
    ("refused", "refused the crawler's identity"),
    ("blocklisted", "on the --blocklist"),
    ("held", "held by Retry-After or back-off"),
    ("robots_unreachable", "robots.txt unreachable"),
)


def _held(metrics: dict[str, Any]) -> str:
    """``blocked by operator policy 1 host (31 URLs), ...`` or ``none``."""
    parts = []
    for reason, label in HOLD_REASONS:
        hosts, urls = metrics.get(f"assign_slots/hosts_{reason}", 0), metrics.get(f"assign_slots/urls_{reason}", 0)
        if hosts or urls:
            parts.append(f"{label} {hosts} host{'s' if hosts != 1 else ''} ({urls} URL{'s' if urls != 1 else ''})")
    return ", ".join(parts) or "none"


def _breakdown(metrics: dict[str, Any], prefix: str) -> str:
    """``a 3, b 1`` from the counters under ``prefix`` (largest first), or ``none``."""
    parts = sorted(
        ((k[len(prefix) :], v) for k, v in metrics.items() if k.startswith(prefix) and v),
        key=lambda kv: (-kv[1], kv[0]),
    )
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in parts) or "none"


def _kinds(counts: dict[str, int]) -> str:
    """``status 1, token 2`` (the kinds that count any), or ``none``."""
    return ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "none"
