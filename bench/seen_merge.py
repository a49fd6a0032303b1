"""The seen checks' merge functions, per-element Python against numpy, µs per element.

    PYTHONPATH=. .venv/bin/python bench/seen_merge.py [--offers 200000] [--repeat 3] [--seed 7]
        [--mode all|reference|blocks]

Each pure function the URL-seen and content-seen stages merge with is timed on generated
input next to its per-element reference (the implementation before #25, kept in
``tests/transforms/*_reference.py``), on the same input in the same process, best of
``--repeat`` runs (CPU time), alternating (so the machine's load falls on both alike). The results are
checked equal before anything is timed.

URL seen (``transforms/url_seen.py``):

- **combine**: ``offers`` link offers over ``offers / 3`` URLs (a page's links repeat
  across a bundle: navigation, popular pages), half of them with a linking-host vote, some
  sitemap entries with a lastmod; combined per fingerprint and sorted (µs per offer);
- **combine again**: the combined candidates in two lists, as the merge combines a bucket's
  lists (distinct fingerprints: µs per candidate);
- **merge (scan)**: a bucket's 50,000 sorted candidates, half known, against the 1,000,000
  stored keys of the bucket's span as a range scan yields them (µs per candidate, and per
  stored key read);
- **merge (key set)**: the same candidates against the keys a key-set read finds (µs per
  candidate).

URL seen, objects against columns (``--mode blocks``; issue #25: ``CandidateBlock``,
schemas/candidate_block.py), the same offers, each path as the stage runs it:

- **bundle combine**: the bundle's offers combined and sorted: ``combine_candidates`` on the
  ``Candidate`` lists, against ``CandidateBlock.from_candidates`` of them and
  ``combine_blocks`` (µs per offer);
- **shuffle**: the combined candidates of 16 buckets encoded and decoded by the coder the
  bucket step declares: ``PackedCoder`` (one pickle of the list), against
  ``CandidateBlockCoder`` (µs per candidate, and bytes per candidate);
- **bucket merge**: a bucket's two lists (half of it each) combined again and the new half
  made ``Candidate`` objects for the frontier (the seen-set join itself is the same array
  code on both paths; µs per candidate).

Content seen (``transforms/content_seen.py``):

- **checksums**: a bucket of 50,000 probes over 40,000 checksums against 200,000 stored
  checksum records, 10,000 of them the bucket's (µs per probe);
- **simhash rows**: one table bucket of 20,000 candidates in rows of 1–3 (this round's
  pairs), 5,000 of the rows holding two stored originals each, in named cells (µs per
  candidate; the cells are parsed by the package's own reader in both);
- **crowded row**: a row of 5,000 near-identical candidates (a trap), compared in URL
  order against its first 64 originals (µs per member).

Not collected by pytest; run it by hand and keep the printed table with the commit.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "transforms"))

import content_seen_merge_reference as content_before  # noqa: E402
import url_seen_reference as url_before  # noqa: E402

from beamcrawl.core.runtime import gctune  # noqa: E402
from beamcrawl.schemas.candidate_block import CandidateBlock, CandidateBlockCoder  # noqa: E402
from beamcrawl.schemas.coders import PackedCoder  # noqa: E402
from beamcrawl.schemas.records import Packed  # noqa: E402
from beamcrawl.schemas.records import Candidate, fp_key  # noqa: E402
from beamcrawl.state import content_rows  # noqa: E402
from beamcrawl.transforms import content_seen, url_seen  # noqa: E402
from beamcrawl.transforms import near_copies  # noqa: E402


def best_of(repeat: int, *fns: Callable[[], Any]) -> list[float]:
    """CPU seconds of one call of each ``fn``, best of ``repeat`` rounds, alternating (CPU
    time, not wall time: the machine is shared, and a descheduled run would count its wait)."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            best[i] = min(best[i], time.process_time() - t0)
    return best


def link_offers(n: int, rng: random.Random) -> list[list[Candidate]]:
    """``n`` offers over ``n // 3`` URLs, in page-sized lists of 25."""
    urls = max(1, n // 3)
    fps = [rng.getrandbits(64) for _ in range(urls)]
    out = []
    for _ in range(n):
        i = min(urls - 1, int(rng.paretovariate(1.2)) - 1) if rng.random() < 0.4 else rng.randrange(urls)
        sitemap = i % 50 == 0
        out.append(
            Candidate(
                fp=fps[i], url=f"http://h{i % 997}.example/p/{i}", host=f"h{i % 997}.example",
                depth=rng.randrange(1, 6), priority=0.5 ** rng.randrange(1, 6),
                source="sitemap" if sitemap else "link",
                inlink_hosts=(rng.getrandbits(32),) if rng.random() < 0.5 else (),
                lastmod=1.7e9 + rng.randrange(10**6) if sitemap else None,
            )
        )  # fmt: skip
    return [out[i : i + 25] for i in range(0, n, 25)]


def bench_url_seen(args: argparse.Namespace, rng: random.Random) -> list[tuple[str, str, float, float]]:
    rows = []
    groups = link_offers(args.offers, rng)
    n = sum(map(len, groups))

    def old_combine() -> list[Candidate]:
        folded = url_before.combine_candidates(groups)
        return sorted(folded.values(), key=lambda c: c.fp)

    def new_combine() -> list[Candidate]:
        return url_seen.combine_candidates(groups)

    assert old_combine() == new_combine()
    old, new = best_of(args.repeat, old_combine, new_combine)
    rows.append(("URL seen: combine, sort", f"per offer ({n:,} offers)", old / n * 1e6, new / n * 1e6))

    # The merge combines a bucket's lists again: mostly distinct fingerprints by then.
    lists = [lst for _, lst in url_seen.bucket_lists(new_combine(), 0)]
    halves = [lists[0][::2], lists[0][1::2]]
    k = len(lists[0])

    def old_recombine() -> list[Candidate]:
        return sorted(url_before.combine_candidates(halves).values(), key=lambda c: c.fp)

    def new_recombine() -> list[Candidate]:
        return url_seen.combine_candidates(halves)

    assert old_recombine() == new_recombine()
    old, new = best_of(args.repeat, old_recombine, new_recombine)
    rows.append(("URL seen: combine again, all distinct", f"per candidate ({k:,})", old / k * 1e6, new / k * 1e6))

    stored = sorted(rng.getrandbits(64) for _ in range(1_000_000))
    known = rng.sample(stored, 25_000)
    cands = url_seen.combine_candidates(
        [[Candidate(fp=f, url="u", host="h", depth=1, priority=0.5) for f in known + [rng.getrandbits(64) for _ in range(25_000)]]]
    )  # fmt: skip
    keys = [fp_key(s) for s in stored]
    found = [fp_key(f) for f in known]

    def old_scan() -> int:
        return sum(1 for _ in url_before.merge_unseen(cands, iter(keys)))

    def new_scan() -> int:
        return len(url_seen.merge_unseen(cands, iter(keys)))

    def old_keyset() -> int:
        return sum(1 for _ in url_before.merge_unseen(cands, sorted(found)))

    def new_keyset() -> int:
        return len(url_seen.merge_unseen(cands, found))

    assert old_scan() == new_scan() == old_keyset() == new_keyset() == 25_000
    old, new = best_of(args.repeat, old_scan, new_scan)
    c = len(cands)
    rows.append(("URL seen: merge, scan of 1 M keys", f"per candidate ({c:,})", old / c * 1e6, new / c * 1e6))
    rows.append(("URL seen: merge, scan of 1 M keys", "per stored key read", old / 1e6 * 1e6, new / 1e6 * 1e6))
    old, new = best_of(args.repeat, old_keyset, new_keyset)
    rows.append(("URL seen: merge, key set", f"per candidate ({c:,})", old / c * 1e6, new / c * 1e6))
    return rows


def bench_url_seen_blocks(args: argparse.Namespace, rng: random.Random) -> list[tuple[str, str, float, float]]:
    rows = []
    groups = link_offers(args.offers, rng)
    offers = [c for g in groups for c in g]
    n = len(offers)

    def objects_combine() -> list[Candidate]:
        return url_seen.combine_candidates(groups)

    def blocks_combine() -> CandidateBlock:
        return url_seen.combine_blocks([CandidateBlock.from_candidates(offers)])

    combined = objects_combine()
    assert blocks_combine().to_candidates() == combined
    old, new = best_of(args.repeat, objects_combine, blocks_combine)
    rows.append(("URL seen: bundle combine, sort", f"per offer ({n:,} offers)", old / n * 1e6, new / n * 1e6))

    bits = 4
    lists = list(url_seen.bucket_lists(combined, bits))
    blocks = list(url_seen.bucket_blocks(blocks_combine(), bits))
    packed, coded = PackedCoder(), CandidateBlockCoder()
    k = len(combined)

    def objects_shuffle() -> int:
        return sum(len(packed.decode(packed.encode(lst))) for _, lst in lists)

    def blocks_shuffle() -> int:
        return sum(len(coded.decode(coded.encode(block))) for _, block in blocks)

    assert objects_shuffle() == blocks_shuffle() == k
    old, new = best_of(args.repeat, objects_shuffle, blocks_shuffle)
    rows.append(("URL seen: bucket shuffle, encode + decode", f"per candidate ({k:,})", old / k * 1e6, new / k * 1e6))
    old_bytes = sum(len(packed.encode(lst)) for _, lst in lists)
    new_bytes = sum(len(coded.encode(block)) for _, block in blocks)
    rows.append(("URL seen: bucket shuffle, bytes", "per candidate (B, not µs)", old_bytes / k, new_bytes / k))

    # A bucket as the merge gets it: two lists of its candidates, half of them new.
    bucket = combined
    halves = [Packed(bucket[::2]), Packed(bucket[1::2])]
    half_blocks = [CandidateBlock.from_candidates(h) for h in halves]
    new_rows = np.arange(0, len(bucket), 2)

    def objects_merge() -> list[Candidate]:
        ordered = url_seen.combine_candidates(halves)
        return [ordered[i] for i in new_rows.tolist()]

    def blocks_merge() -> list[Candidate]:
        return url_seen.combine_blocks(half_blocks).to_candidates(new_rows)

    assert objects_merge() == blocks_merge()
    old, new = best_of(args.repeat, objects_merge, blocks_merge)
    rows.append(("URL seen: bucket merge, half new", f"per candidate ({len(bucket):,})", old / k * 1e6, new / k * 1e6))
    return rows


def _near(rng: random.Random, fp: int, most: int = 4) -> int:
    for bit in rng.sample(range(64), rng.randrange(most + 1)):
        fp ^= 1 << bit
    return fp


def bench_content_seen(args: argparse.Namespace, rng: random.Random) -> list[tuple[str, str, float, float]]:
    rows = []
    checks = sorted({rng.getrandbits(64) for _ in range(40_000)})
    groups = []
    for i, c in enumerate(checks):
        probes = [
            content_seen.Probe(f"http://h{i % 97}.com/{i}/{k}", i, c, None, 1.0, "d") for k in range(1 + (i % 4 == 0))
        ]
        groups.append((c, probes))
    n_probes = sum(len(p) for _, p in groups)
    mine = rng.sample(checks, 10_000)
    stored = sorted(
        [(c, content_rows.ContentRecord(f"http://o.com/{c}", "exact", 1.0, "d", 0, 1)) for c in mine]
        + [(rng.getrandbits(64), content_rows.ContentRecord("http://o.com/x", "exact", 1.0, "d", 0, 1)) for _ in range(190_000)]
    )  # fmt: skip

    def old_checks() -> Any:
        return content_before.decide_checksums(groups, iter(stored), 2)

    def new_checks() -> Any:
        return content_seen.decide_checksums(groups, iter(stored), 2)

    assert old_checks() == new_checks()
    old, new = best_of(args.repeat, old_checks, new_checks)
    rows.append(("content seen: checksums", f"per probe ({n_probes:,})", old / n_probes * 1e6, new / n_probes * 1e6))

    items = []
    stored_rows = {}
    for r in range(10_000):
        key = bytes([3]) + rng.getrandbits(40).to_bytes(5, "big")
        base = rng.getrandbits(64)
        for _ in range(1 + r % 3):
            items.append(near_copies.Keyed(key, _near(rng, base), rng.getrandbits(64)))
        if r % 2 == 0:
            cells = {}
            for k in range(2):
                fp, url = _near(rng, base), f"http://kept.com/{r}/{k}"
                cells.update(content_rows.simhash_cells(content_seen.Probe(url, r, 0, fp, 1.0, "d"), 1)[0].cells)
            stored_rows[key] = cells
    items.sort(key=lambda it: it.key)
    srows = sorted(stored_rows.items())
    n_items = len(items)

    def old_rows() -> Any:
        return content_before.merge_prefix_rows(items, iter(srows), 2)

    def new_rows() -> Any:
        return near_copies.merge_prefix_rows(items, iter(srows), 2)

    assert old_rows() == new_rows()
    old, new = best_of(args.repeat, old_rows, new_rows)
    rows.append(
        ("content seen: simhash rows", f"per candidate ({n_items:,})", old / n_items * 1e6, new / n_items * 1e6)
    )

    base = rng.getrandbits(64)
    members = [(_near(rng, base, 8), rng.getrandbits(64)) for _ in range(5_000)]
    names = {u: f"http://trap.com/{i}" for i, (_, u) in enumerate(members)}

    def old_crowded() -> Any:
        out: dict[int, set[tuple[int, int]]] = {}
        return content_before.crowded_pairs(members, names, out, 3, 64), out

    def new_crowded() -> Any:
        out: dict[int, set[tuple[int, int]]] = {}
        return near_copies.crowded_pairs(members, names, out, 3, 64), out

    assert old_crowded() == new_crowded()
    old, new = best_of(args.repeat, old_crowded, new_crowded)
    m = len(members)
    rows.append(("content seen: crowded row", f"per member ({m:,})", old / m * 1e6, new / m * 1e6))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--mode", choices=("all", "reference", "blocks"), default="all",
        help="reference: numpy against the per-element references; blocks: objects against columns",
    )  # fmt: skip
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    gctune.tune()  # as the stages' workers run (the collector's walks would dominate both)
    if args.mode in ("all", "reference"):
        rows = bench_url_seen(args, rng) + bench_content_seen(args, rng)
        print("| function | unit | per-element Python µs | numpy µs | × faster |")
        print("|---|---|---:|---:|---:|")
        for name, unit, old, new in rows:
            print(f"| {name} | {unit} | {old:.3f} | {new:.3f} | {old / new:.1f} |")
    if args.mode in ("all", "blocks"):
        rows = bench_url_seen_blocks(args, random.Random(args.seed))
        print()
        print("| URL seen path | unit | Candidate objects | CandidateBlock columns | × |")
        print("|---|---|---:|---:|---:|")
        for name, unit, old, new in rows:
            print(f"| {name} | {unit} | {old:.3f} | {new:.3f} | {old / new:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
