"""What content seen's checksum-bucket shuffle costs a page: bytes and CPU µs.

Every fetched 2xx payload's probe (URL, URL fingerprint, checksum, simhash, fetch time,
payload digest) crosses the "Group by checksum bucket" shuffle. For ``--pages`` probes of
simweb URLs over ``--hosts`` hosts, taken as one bundle, both forms of a bucket's element
are built, encoded as the runner's coder encodes them, decoded, and grouped by checksum as
the merge needs them:

- **packed**: the form before this bench, a ``Packed`` list of ``Probe`` records a bucket
  (pickled: the class once, a row of field values each), grouped one probe at a time in a
  dict;
- **block**: ``content_seen``'s form now, a ``ProbeBlock`` a bucket (``ProbeBlockCoder``:
  columns, the digests as raw bytes, the URLs as a host code and the rest), grouped over the
  checksum column (``content_seen.group_probes``).

Both forms group to the same probes in the same order (checked on every run). Figures are
CPU µs a page, the best of ``--repeat`` runs, and encoded bytes a page::

    .venv/bin/python bench/checksum_buckets.py [--pages 20000] [--hosts 3000] [--bits 4] [--repeat 5]

A bundle's pages share hosts as the round's do: the in-process runner gives a stage one
bundle of the whole round a worker, so a bucket of a 50,000-page round over 3,000 hosts
holds about one page a host per 16 buckets; a smaller bundle or more hosts, fewer.
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import random
import time
from collections.abc import Callable
from typing import Any

import beamcrawl.schemas.coders  # noqa: F401  (registers the coders)
from beamcrawl.core.archive.warc_revisit import payload_digest
from beamcrawl.schemas.probe_block import ProbeBlock, ProbeBlockCoder
from beamcrawl.schemas.records import Packed, Probe
from beamcrawl.simweb import SimWeb
from beamcrawl.transforms.content_seen import group_probes
from beamcrawl.transforms.url_seen import bucket_of

Element = tuple[int, Any]


def make_probes(pages: int, hosts: int, seed: int = 1) -> list[Probe]:
    """Probes of simweb pages (3,000-host names, port 38123, as ``compare.py`` crawls)."""
    web = SimWeb(max(hosts, 1), seed=3, pages_per_host=1_000_000, port=38123)
    rnd = random.Random(seed)
    probes = []
    for _ in range(pages):
        url = web.url(rnd.randrange(hosts), f"/p/{rnd.randrange(1_000_000)}.html")
        simhash = rnd.getrandbits(64) if rnd.random() < 0.95 else None
        body = hashlib.sha1(url.encode()).digest()
        probes.append(Probe(url, rnd.getrandbits(64), rnd.getrandbits(64), simhash, 1.7e9 + rnd.random() * 60,
                            payload_digest(body)))  # fmt: skip
    return probes


def bucket(probes: list[Probe], bits: int) -> dict[int, list[Probe]]:
    buckets: dict[int, list[Probe]] = {}
    for probe in probes:
        buckets.setdefault(bucket_of(probe.checksum, bits), []).append(probe)
    return buckets


def packed_group(probes: Packed) -> list[tuple[int, list[Probe]]]:
    """A bucket's probes grouped one by one, as the merge did before the blocks."""
    merged: dict[int, list[Probe]] = {}
    for probe in probes:
        merged.setdefault(probe.checksum, []).append(probe)
    return sorted(merged.items())


def _timed(work: Callable[[], Any]) -> tuple[float, Any]:
    start = time.process_time()
    out = work()
    return time.process_time() - start, out


def measure(pages: int, hosts: int, bits: int, repeat: int, seed: int = 1) -> dict[str, dict[str, float]]:
    probes = make_probes(pages, hosts, seed)
    buckets = bucket(probes, bits)
    coder = ProbeBlockCoder()
    forms: dict[str, tuple[Callable[[list[Probe]], Any], Callable[[Any], bytes], Callable[[bytes], Any], Callable]] = {
        "packed": (Packed, lambda v: pickle.dumps(v, pickle.HIGHEST_PROTOCOL), pickle.loads, packed_group),
        "block": (ProbeBlock.from_probes, coder.encode, coder.decode, group_probes),
    }
    phases = ("build", "encode", "decode", "group")
    best = {name: dict.fromkeys(phases, float("inf")) for name in forms}
    sizes: dict[str, float] = {}
    elements: dict[str, int] = {}
    grouped_by_form = {}
    # The forms take turns within each repeat, so that a change of the machine's speed
    # between repeats reaches both; each phase's best is kept.
    for _ in range(repeat):
        for name, (build, encode, decode, group) in forms.items():
            times = {}
            times["build"], built = _timed(lambda: [build(v) for v in buckets.values()])
            times["encode"], encoded = _timed(lambda: [encode(e) for e in built])
            times["decode"], decoded = _timed(lambda: [decode(b) for b in encoded])
            times["group"], grouped_by_form[name] = _timed(lambda: [group(d) for d in decoded])
            for phase in phases:
                best[name][phase] = min(best[name][phase], times[phase])
            sizes[name] = sum(map(len, encoded)) / pages
            elements[name] = len(built)
    if grouped_by_form["packed"] != grouped_by_form["block"]:
        raise SystemExit("the two forms grouped different probes: the bench is wrong")
    per = 1e6 / pages
    return {
        name: {
            **{f"{phase}_us": best[name][phase] * per for phase in phases},
            "total_us": sum(best[name].values()) * per,
            "bytes": sizes[name],
            "elements": elements[name],
        }
        for name in forms
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=20_000, help="probes in the bundle")
    ap.add_argument("--hosts", type=int, default=3000, help="hosts their URLs are on")
    ap.add_argument("--bits", type=int, default=4, help="bucket bits (2**bits buckets)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    figures = measure(args.pages, args.hosts, args.bits, args.repeat)
    print(
        f"{args.pages:,} probes on {args.hosts:,} hosts, {args.bits} bucket bits, best of {args.repeat}; CPU µs a page"
    )
    print("| form | elements | build | encode | decode | group | all | bytes a page |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, f in figures.items():
        print(
            f"| {name} | {f['elements']:,} | {f['build_us']:.2f} | {f['encode_us']:.2f} | {f['decode_us']:.2f} "
            f"| {f['group_us']:.2f} | {f['total_us']:.2f} | {f['bytes']:.0f} |"
        )


if __name__ == "__main__":
    main()
