"""``beamcrawl report OUT_DIR``: PNG charts of a crawl's rounds (see analysis/charts.py).

EXAMPLES::

    beamcrawl report demo-out                 # charts into demo-out/reports/
    beamcrawl report gs://b/out --to charts/  # a crawl's output on Cloud Storage, charts here
"""

from __future__ import annotations

import sys
from typing import Sequence

from beamcrawl.cli.args import OneLineArgumentParser


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineArgumentParser(
        prog="beamcrawl report",
        description="Draw PNG charts of a crawl's rounds from its round reports and Parquet outputs.",
    )
    parser.add_argument("out", metavar="OUT_DIR", help="The crawl's output folder (what crawl --out named).")
    parser.add_argument("--to", metavar="DIR", help="Where to write the charts (default OUT_DIR/reports).")
    args = parser.parse_args(list(argv or []))

    from beamcrawl.analysis.charts import write_charts

    try:
        paths = write_charts(args.out.rstrip("/") or args.out, args.to)
    except (ValueError, OSError) as exc:
        print(f"beamcrawl report: error: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
