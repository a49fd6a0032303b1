"""``beamcrawl simweb audit LOG TRUTH``: the server-side politeness audit as a command.

Reads simweb's request log (``--log``) and ground truth (``--truth``) and checks the crawl's
politeness from the server's side (``audit.py``): one line per check, then one line of
totals. Exit status 0 when every check passes, 1 when any finds a violation, 2 when the
input cannot be read.

    beamcrawl simweb audit requests.jsonl truth.jsonl --min-delay 0.5
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from beamcrawl.simweb.audit import AuditReport, audit

__all__ = ["check_lines", "main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="beamcrawl simweb audit",
        description="Check a crawl's politeness from simweb's request log and ground truth: robots.txt "
        "obeyed, one request in flight per host, gaps of at least the delay, robots.txt first.",
    )
    parser.add_argument("log", metavar="LOG", help="simweb's request log (its --log file).")
    parser.add_argument("truth", metavar="TRUTH", help="simweb's ground truth (its --truth file).")
    parser.add_argument(
        "--token", default="beamcrawl", help="Product token of the audited crawler (default beamcrawl)."
    )
    parser.add_argument(
        "--min-delay", type=float, default=1.0,
        help="The crawl's --min-delay, seconds (default 1.0); a host's Crawl-delay raises it.",
    )  # fmt: skip
    parser.add_argument("--tolerance", type=float, default=0.0, help="Slack for clock jitter, seconds (default 0).")
    return parser


def check_lines(report: AuditReport) -> list[str]:
    """One line per check: ``NAME: ok|VIOLATIONS N (...)``, then the totals."""

    def line(name: str, count: int, what: str, examples: list[dict], extra: str = "") -> str:
        verdict = "ok" if count == 0 else f"VIOLATIONS {count}"
        first = f"; e.g. {json.dumps(examples[0], sort_keys=True)}" if count and examples else ""
        return f"{name}: {verdict} ({count} {what}{extra}{first})"

    gap = (
        ""
        if report.min_gap is None
        else f"; shortest start-to-start gap {report.min_gap:.3f}s on {report.min_gap_host}"
    )
    lines = [
        line("robots", report.robots_violations, "requests robots.txt forbids", report.robots_violation_examples),
        line(
            "overlaps",
            report.overlaps,
            "requests while another to the same host was in flight",
            report.overlap_examples,
        ),
        line(
            "gaps",
            report.short_gaps,
            f"gaps below the host's delay (at least {report.min_delay:g}s)",
            report.short_gap_examples,
            gap,
        ),  # fmt: skip
        line(
            "robots-first",
            report.robots_not_first,
            "hosts whose first request was not robots.txt",
            report.robots_not_first_examples,
        ),
        f"audited {report.total_requests} requests to {report.distinct_hosts} hosts "
        f"({report.ignored_requests} of other agents ignored)"
        + (f"; {len(report.unknown_hosts)} hosts not in the truth" if report.unknown_hosts else ""),
    ]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from beamcrawl.simweb.testing import read_request_log
    from beamcrawl.simweb.truth import load_truth

    try:
        with open(args.log, encoding="utf-8"):
            pass  # read_request_log treats a missing log as empty; here it is a mistake
        requests = read_request_log(args.log)
        truth = load_truth(args.truth)
    except (OSError, ValueError, KeyError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(
            f"beamcrawl simweb audit: error: cannot read {getattr(exc, 'filename', None) or 'input'}: {detail}",
            file=sys.stderr,
        )
        return 2
    report = audit(requests, truth, args.token, args.min_delay, args.tolerance)
    print("\n".join(check_lines(report)))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
