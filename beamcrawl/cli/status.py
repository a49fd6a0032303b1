"""``beamcrawl status --crawl OUT_DIR``: whether a round is running, its live counters, and
the last round's summary (pipelines/live_status.py), from anywhere the folder is readable.

EXAMPLES::

    beamcrawl status --crawl crawl            # a crawl on this machine (any store)
    beamcrawl status --crawl gs://b/crawl     # a crawl whose output is on Cloud Storage
    beamcrawl status --crawl crawl --json     # the same, as JSON (what GET /v1/status answers)
"""

from __future__ import annotations

import json
import os
import sys
from typing import Sequence

from beamcrawl.cli.args import OneLineArgumentParser


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineArgumentParser(
        prog="beamcrawl status",
        description="Say whether a crawl's round is running, its live counters and the last round's summary.",
    )
    parser.add_argument(
        "--crawl", metavar="OUT_DIR", required=True, help="The crawl's output folder (what crawl --out named)."
    )
    parser.add_argument("--json", action="store_true", help="Print the status as JSON.")
    args = parser.parse_args(list(argv or []))

    from beamcrawl.core.runtime import files
    from beamcrawl.pipelines.live_status import read_status, status_lines

    out = args.crawl if files.is_remote(args.crawl) else os.path.abspath(args.crawl)
    status = read_status(out)
    if status is None:
        print(
            f"beamcrawl status: error: no crawl at {args.crawl} (no status.json and no round report)", file=sys.stderr
        )
        return 1
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
    else:
        print("\n".join(status_lines(out, status)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
