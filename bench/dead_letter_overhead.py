"""What setting failing elements aside costs per element (transforms/dead_letter.py).

Two measurements:

1. In Python, outside Beam: a DoFn body as it was, against the same body in the ``try``
   block with the :class:`~beamcrawl.transforms.dead_letter.Outlet` fault check every stage
   now runs (no fault injected, so nothing is raised), over a million calls.
2. On the in-process runner (FnApiRunner): a ParDo of a trivial DoFn, against the guarded
   DoFn with its tagged ``errors`` output (``.with_outputs``), over ``--elements`` elements,
   best of ``--repeat`` runs. The difference per element is what a stage pays.

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


def _python(n: int = 1_000_000) -> tuple[float, float]:
    plain, guarded = _PlainFn(), _GuardedFn()
    t_plain = min(timeit.repeat(lambda: [list(plain.process(i)) for i in range(n)], number=1, repeat=3))
    t_guarded = min(timeit.repeat(lambda: [list(guarded.process(i)) for i in range(n)], number=1, repeat=3))
    return t_plain / n * 1e6, t_guarded / n * 1e6


def _pipeline(n: int, guarded: bool) -> float:
    opts = PipelineOptions(flags=["--runner=FnApiRunner"])
    started = time.perf_counter()
    with beam.Pipeline(options=opts) as p:
        xs = p | beam.Create(range(n), reshuffle=False)
        if guarded:
            out = xs | beam.ParDo(_GuardedFn()).with_outputs(ERRORS, main="out")
            _ = out.out | "Count" >> beam.combiners.Count.Globally()
        else:
            _ = xs | beam.ParDo(_PlainFn()) | "Count" >> beam.combiners.Count.Globally()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    plain_us, guarded_us = _python()
    print(f"python: plain {plain_us:.3f} us/element, guarded {guarded_us:.3f} us/element, "
          f"difference {guarded_us - plain_us:.3f} us")  # fmt: skip
    plain = min(_pipeline(args.elements, False) for _ in range(args.repeat))
    guarded = min(_pipeline(args.elements, True) for _ in range(args.repeat))
    per = (guarded - plain) / args.elements * 1e6
    print(f"FnApiRunner, {args.elements} elements: plain {plain:.2f} s, guarded {guarded:.2f} s, "
          f"difference {per:.2f} us/element (best of {args.repeat})")  # fmt: skip


if __name__ == "__main__":
    main()
