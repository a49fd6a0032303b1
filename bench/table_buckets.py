"""What content seen's table-bucket shuffle costs a new original: bytes and CPU µs.

Each new original is looked up in 20 permuted simhash tables. For ``--pages`` random
``(simhash, url fingerprint)`` pairs taken as one bundle, three forms of the "Group by table
bucket" elements are built, pickled (what the runner's coder does to them), unpickled and
keyed (each item's row key in each table, sorted, as the merge needs them):

- **pairs**: the form before 6a28104, a ``Packed`` list of ``(int, int)`` tuples a (table,
  bucket), bucketed one item at a time; keyed one by one with ``TableLayout.table_key``;
- **table blocks**: the form from 6a28104, one block of 16-byte little-endian pairs
  (``pack_items``) a (table, bucket): 20 items a page; keyed by ``key_items``;
- **group blocks**: ``content_seen``'s form now, one block a (group, bucket), a group being
  the tables whose permuted fingerprints begin alike (``TableLayout.bucket_groups``): 4 items
  a page with up to 11 bits; the merge keys a block in each of its group's tables.

All forms key every table's items alike (checked on every run). Figures are CPU µs a page,
the best of ``--repeat`` runs, and encoded bytes a page::

    .venv/bin/python bench/table_buckets.py [--pages 2000] [--bits 4] [--repeat 5]
"""

from __future__ import annotations

import argparse
import pickle
import random
import time
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import numpy as np

from beamcrawl.core.content import textfp
from beamcrawl.schemas.records import Packed
from beamcrawl.transforms import content_seen
from beamcrawl.transforms import near_copies  # noqa: E402
from beamcrawl.transforms.url_seen import bucket_of

LAYOUT = textfp.LAYOUT
Element = tuple[tuple[int, int], Any]


def pairs_bucket(probes: list[tuple[int, int]], bits: int) -> list[Element]:
    """The bundle's items as a ``Packed`` list of int pairs per (table, bucket)."""
    fps = np.array([fp for fp, _ in probes], dtype=np.uint64)
    out: list[Element] = []
    for table in range(len(LAYOUT.orders)):
        buckets: dict[int, list[tuple[int, int]]] = {}
        for item, value in zip(probes, LAYOUT.permute_many(fps, table).tolist()):
            buckets.setdefault(bucket_of(value, bits), []).append(item)
        out += [((table, bucket), Packed(items)) for bucket, items in buckets.items()]
    return out


def pairs_key(bits: int, key: tuple[int, int], items: list[tuple[int, int]]) -> dict[int, list[Any]]:
    """A bucket's int pairs keyed one at a time (each item's ``table_key``), sorted stably,
    as ``key_items`` did before 6a28104."""
    table = key[0]
    permuted = LAYOUT.permute_many(np.array([fp for fp, _ in items], dtype=np.uint64), table).tolist()
    keyed = (
        near_copies.Keyed(LAYOUT.table_key(table, value), fp, url_fp) for value, (fp, url_fp) in zip(permuted, items)
    )
    return {table: sorted(keyed, key=itemgetter(0))}


def table_blocks_bucket(news: list[content_seen.NewContent], bits: int) -> list[Element]:
    """The bundle's items as ``_BucketPrefixesFn`` gave them from 6a28104: a block per
    (table, bucket)."""
    fps = np.array([n.first.simhash for n in news], dtype=np.uint64)
    url_fps = np.array([n.first.url_fp for n in news], dtype=np.uint64)
    out: list[Element] = []
    for table in range(len(LAYOUT.orders)):
        buckets = LAYOUT.permute_many(fps, table) >> np.uint64(64 - bits) if bits else np.zeros(len(fps), np.uint64)
        order = np.argsort(buckets, kind="stable")
        ordered = buckets[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        for start, end in zip(starts.tolist(), [*starts[1:].tolist(), len(order)]):
            taken = order[start:end]
            out.append(((table, int(ordered[start])), near_copies.pack_items(fps[taken], url_fps[taken])))
    return out


def table_blocks_key(bits: int, key: tuple[int, int], block: bytes) -> dict[int, list[Any]]:
    keyed, _ = near_copies.key_items(key[0], near_copies.unpack_items([block]), LAYOUT)
    return {key[0]: keyed}


def group_blocks_bucket(news: list[content_seen.NewContent], bits: int) -> list[Element]:
    """The bundle's items as ``_BucketPrefixesFn`` gives them: a block per (group, bucket),
    every ``PROBES_HELD`` items and at the bundle's end."""
    fn = content_seen._BucketPrefixesFn(bits, LAYOUT)
    fn.start_bundle()
    out = [kv for new in news for kv in fn.process(new)]
    return out + [wv.value for wv in fn.finish_bundle()]


def group_blocks_key(bits: int, key: tuple[int, int], block: bytes) -> dict[int, list[Any]]:
    """A group's block keyed in each of its tables, as ``_MergePrefixesFn`` does."""
    pairs = near_copies.unpack_items([block])
    return {table: near_copies.key_items(table, pairs, LAYOUT)[0] for table in LAYOUT.bucket_groups(bits)[key[0]]}


def _best(repeat: int, work: Callable[[], Any]) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.process_time()
        out = work()
        best = min(best, time.process_time() - start)
    return best, out


def measure(pages: int, bits: int, repeat: int, seed: int = 1) -> dict[str, dict[str, float]]:
    rnd = random.Random(seed)
    probes = [(rnd.getrandbits(64), rnd.getrandbits(64)) for _ in range(pages)]
    # What each form's bucketing starts from: the pairs, or the new content the DoFn gets.
    news = [content_seen.NewContent(0, content_seen.Probe("", u, 0, fp, 0.0, "")) for fp, u in probes]
    forms = {
        "pairs": (pairs_bucket, pairs_key, probes),
        "table blocks": (table_blocks_bucket, table_blocks_key, news),
        "group blocks": (group_blocks_bucket, group_blocks_key, news),
    }
    figures: dict[str, dict[str, float]] = {}
    keyed_by_form = {}
    for name, (bucket, key, given) in forms.items():
        t_bucket, elements = _best(repeat, lambda: bucket(given, bits))
        t_pickle, encoded = _best(repeat, lambda: [pickle.dumps(e, pickle.HIGHEST_PROTOCOL) for e in elements])
        t_unpickle, decoded = _best(repeat, lambda: [pickle.loads(b) for b in encoded])
        t_key, keyed = _best(repeat, lambda: [key(bits, k, v) for k, v in decoded])
        # Every table's keyed items, whichever bucket each came in.
        by_table: dict[int, list[Any]] = {}
        for tables in keyed:
            for table, items in tables.items():
                by_table.setdefault(table, []).extend(items)
        keyed_by_form[name] = {table: sorted(items) for table, items in by_table.items()}
        per = 1e6 / pages
        figures[name] = {
            "bucket_us": t_bucket * per,
            "pickle_us": t_pickle * per,
            "unpickle_us": t_unpickle * per,
            "key_us": t_key * per,
            "total_us": (t_bucket + t_pickle + t_unpickle + t_key) * per,
            "bytes": sum(map(len, encoded)) / pages,
            "elements": len(elements),
        }
    if len({repr(keyed) for keyed in keyed_by_form.values()}) != 1:
        raise SystemExit("the forms keyed different items: the bench is wrong")
    return figures


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=2000, help="new originals in the bundle")
    ap.add_argument("--bits", type=int, default=4, help="bucket bits (2**bits buckets a table)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    figures = measure(args.pages, args.bits, args.repeat)
    print(f"{args.pages} new originals, {args.bits} bucket bits, best of {args.repeat}; CPU µs a page")
    print("| form | elements | bucket | pickle | unpickle | key | all | bytes a page |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, f in figures.items():
        print(
            f"| {name} | {f['elements']:,} | {f['bucket_us']:.1f} | {f['pickle_us']:.1f} | {f['unpickle_us']:.1f} "
            f"| {f['key_us']:.1f} | {f['total_us']:.1f} | {f['bytes']:.0f} |"
        )


if __name__ == "__main__":
    main()
