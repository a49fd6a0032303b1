"""What setting failing elements aside costs per element (transforms/dead_letter.py).

Two measurements:

1. In Python, outside Beam: a DoFn body as it was, against the same body in the ``try``
   block with the :class:`~beamcrawl.transforms.dead_letter.Outlet` fault check every stage
   now runs (no fault injected, so nothing is raised), over a million calls.
2. On the in-process runner (FnApiRunner): a ParDo of a trivial DoFn, the same with a tagged
   ``errors`` output declared (``.with_outputs``), and the guarded DoFn with it, over
   ``--elements`` elements, best of ``--repeat`` interleaved runs. The difference per element
   is what a stage pays.

    python bench/dead_letter_overhead.py [--elements 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
import timeit
from typing import Any, Iterator

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beamcrawl.transforms.dead_letter import ERRORS, Outlet


def _work(x: int) -> int:
    return x + 1


class _PlainFn(beam.DoFn):
    def process(self, x: int) -> Iterator[int]:
        yield _work(x)


class _GuardedFn(beam.DoFn):
    def __init__(self) -> None:
        self.dead = Outlet("bench")

    def process(self, x: int) -> Iterator[Any]:
        try:
            self.dead.check(x)
            out = _work(x)
        except Exception as exc:
            yield self.dead.tagged(exc, x)
            return
        yield out


def _python(n: int = 1_000_000, repeat: int = 5) -> tuple[float, float]:
    plain, guarded = _PlainFn(), _GuardedFn()
    t_plain, t_guarded = [], []
    for _ in range(repeat):  # interleaved, so that a busy machine slows both alike
        t_plain.append(timeit.timeit(lambda: [list(plain.process(i)) for i in range(n)], number=1))
        t_guarded.append(timeit.timeit(lambda: [list(guarded.process(i)) for i in range(n)], number=1))
    return min(t_plain) / n * 1e6, min(t_guarded) / n * 1e6


def _pipeline(n: int, variant: str) -> float:
    """``plain``: the DoFn as it was; ``tagged``: the same with an ``errors`` output declared;
    ``guarded``: the try block and fault check too (what a stage now runs)."""
    opts = PipelineOptions(flags=["--runner=FnApiRunner"])
    started = time.perf_counter()
    with beam.Pipeline(options=opts) as p:
        xs = p | beam.Create(range(n), reshuffle=False)
        if variant == "plain":
            main = xs | beam.ParDo(_PlainFn())
        else:
            fn = _GuardedFn() if variant == "guarded" else _PlainFn()
            main = (xs | beam.ParDo(fn).with_outputs(ERRORS, main="out")).out
        _ = main | "Count" >> beam.combiners.Count.Globally()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    plain_us, guarded_us = _python()
    print(f"python: plain {plain_us:.3f} us/element, guarded {guarded_us:.3f} us/element, "
          f"difference {guarded_us - plain_us:.3f} us")  # fmt: skip
    variants = ("plain", "tagged", "guarded")
    runs: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.repeat):  # interleaved, as above
        for variant in variants:
            runs[variant].append(_pipeline(args.elements, variant))
    best = {v: min(runs[v]) for v in variants}
    print(f"FnApiRunner, {args.elements} elements, best of {args.repeat}: "
          + ", ".join(f"{v} {best[v]:.2f} s" for v in variants))  # fmt: skip
    for v in ("tagged", "guarded"):
        print(f"  {v} - plain: {(best[v] - best['plain']) / args.elements * 1e6:.2f} us/element")


if __name__ == "__main__":
    main()
