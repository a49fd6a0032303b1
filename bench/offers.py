"""What URL seen's first half costs a page: a batch's offers made, then combined per fingerprint.

Two DoFns of the round run here as the round runs them, without a runner: the candidates stage
(``_CandidatesFn``: each page's followable links of a sane shape) and the bucket stage
(``_BucketFn``: the offers combined per fingerprint and cut into buckets), over ``--pages``
simweb pages (rendered from the model, no server) in batches of 1,000, each batch one call.
Two forms, taking turns, their bucket blocks checked equal:

- **round**: whatever the candidates stage gives, as the round runs it: since af87e56 one
  ``CandidateBlock`` a batch, made from the offers' rows (``page_offers``,
  ``CandidateBlock.from_rows``), which the bucket stage holds as it is; before, a list of
  ``Candidate`` (run this script with ``PYTHONPATH`` at an older tree to time that tree's);
- **candidates**: a list of ``Candidate`` a batch (``page_candidates``), which the bucket
  stage checks one by one and makes a block of.

CPU µs a page and an offer, the best of ``--repeat`` runs::

    .venv/bin/python bench/offers.py [--hosts 300] [--pages 4000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from link_hosts import parsed  # noqa: E402
from per_page_costs import simweb_pages  # noqa: E402

from beamcrawl.core.urls.urlshape import ShapeRules  # noqa: E402
from beamcrawl.schemas.records import Batched, PageBatch  # noqa: E402
from beamcrawl.transforms import url_seen  # noqa: E402

__all__ = ["main", "run"]

BATCH = 1000
BITS = 8


def run(batches: list[PageBatch], as_round: bool) -> tuple[int, list[Any]]:
    """Both stages over the batches: (offers made, the bucket stage's candidates by bucket)."""
    shape = ShapeRules()
    offers_fn = url_seen._CandidatesFn(shape, url_seen.MAX_REDIRECTS)
    bucket_fn = url_seen._BucketFn(BITS, None)
    bucket_fn.start_bundle()
    offered = 0
    out: list[Any] = []
    for batch in batches:
        if as_round:
            made = list(offers_fn.process(batch))
        else:
            made = [
                Batched(
                    c for page in batch.pages for c in url_seen.page_candidates(page, shape, {}, url_seen.MAX_REDIRECTS)
                )
            ]
        for offers in made:
            offered += len(offers)
            out += bucket_fn.process(offers)
    out += [w.value for w in bucket_fn.finish_bundle()]
    return offered, out


def _rows(out: list[Any]) -> list[tuple[int, list[Any]]]:
    return [(bucket, block.to_candidates()) for bucket, block in out]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=300)
    p.add_argument("--pages", type=int, default=4000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    pages = parsed(simweb_pages(args.hosts, args.pages))
    batches = [PageBatch(pages[i : i + BATCH]) for i in range(0, len(pages), BATCH)]
    offered, by_round = run(batches, True)
    if _rows(by_round) != _rows(run(batches, False)[1]):
        print("offers: the two forms' buckets differ", file=sys.stderr)
        return 1
    best = {"round": float("inf"), "candidates": float("inf")}
    for _ in range(args.repeat):
        for form in best:
            gc.collect()  # each run starts from the same heap: the collector's timing is no form's cost
            t0 = time.process_time()
            run(batches, form == "round")
            best[form] = min(best[form], time.process_time() - t0)
    print(f"{len(pages):,} pages, {offered:,} offers, batches of {BATCH:,}; CPU, best of {args.repeat}:")
    for form, seconds in best.items():
        print(
            f"  {form:<8} {1e6 * seconds / len(pages):7.1f} µs a page  {1e6 * seconds / max(1, offered):6.2f} µs an offer"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
