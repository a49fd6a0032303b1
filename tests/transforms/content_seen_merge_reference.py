"""Content seen's merge functions as they were before they were vectorised (at 10d4d8d): the
checksum merge one stored row at a time, and the near-copy search one Hamming distance at a
time (``textfp.hamming`` over Python ints, pair by pair).

Kept only as the reference the numpy versions in ``transforms/content_seen.py`` are checked
against (``test_content_seen.py``) and timed against (``bench/seen_merge.py``); nothing in
the package uses it. The cell parsing and the records are the package's own, so the two
always read the same stored rows.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

from beamcrawl.core.content import textfp
from beamcrawl.transforms.content_seen import Copy, NewContent, Probe, decide_checksum
from beamcrawl.transforms.near_copies import (
    MAX_PAIRWISE,
    Evidence,
    add_evidence,
    Keyed,
    match_key,
    order_key,
)
from beamcrawl.state.content_rows import ContentRecord, parse_simhash_cells

__all__ = ["decide_checksums", "merge_prefix_rows", "crowded_pairs"]


def decide_checksums(
    groups: Sequence[tuple[int, Sequence[Probe]]],
    stored: Iterable[tuple[int, ContentRecord]],
    round_no: int | None = None,
) -> tuple[list[Copy], list[NewContent]]:
    """As ``content_seen.decide_checksums`` (the same arguments and result), matching the
    stored rows in one sequential pass."""
    copies: list[Copy] = []
    new: list[NewContent] = []
    rows = iter(stored)
    current = next(rows, None)
    for check, probes in groups:
        while current is not None and current[0] < check:
            current = next(rows, None)
        record = current[1] if current is not None and current[0] == check else None
        # The one-pass match is what this reference keeps; the decision given the match is
        # the package's own (content_seen.decide_checksum), unchanged by the vectorising.
        found, fresh = decide_checksum(check, probes, record, round_no)
        copies.extend(found)
        if fresh is not None:
            new.append(fresh)
    for _ in rows:  # read the scan to its end, so its stream closes
        pass
    return copies, new


def merge_prefix_rows(
    items: Sequence[Keyed],
    stored_rows: Iterable[tuple[bytes, Mapping[str, bytes]]],
    round_no: int | None = None,
    max_distance: int = textfp.MAX_DISTANCE,
    max_pairwise: int = MAX_PAIRWISE,
    names: Callable[[list[tuple[int, int]]], Mapping[tuple[int, int], str]] | None = None,
) -> tuple[dict[int, Evidence], list[tuple[tuple[int, int], ...]], int, int]:
    """As ``near_copies.merge_prefix_rows`` (the same arguments and result), one Hamming
    distance at a time."""
    found: dict[int, Evidence] = {}
    crowded: list[tuple[tuple[int, int], ...]] = []
    matches: list[tuple[int, int, tuple[int, int], str | None]] = []  # (candidate, distance, original, url)
    rows = iter(stored_rows)
    current = next(rows, None)
    compared = pairs = 0
    i = 0
    while i < len(items):
        key = items[i].key
        j = i
        while j < len(items) and items[j].key == key:
            j += 1
        group = items[i:j]
        i = j
        while current is not None and current[0] < key:
            current = next(rows, None)
        if current is not None and current[0] == key:
            originals = parse_simhash_cells(current[1], round_no)
            for item in group:
                for fp, url_fp, url in originals:
                    compared += 1
                    if url_fp == item.url_fp:
                        continue  # its own earlier fingerprint: the same page, changed a little
                    d = textfp.hamming(item.fp, fp)
                    if d <= max_distance:
                        matches.append((item.url_fp, d, (fp, url_fp), url))
        if len(group) > max_pairwise:
            # Which pairs a crowded row checks depends on its members' URL order: named later.
            crowded.append(tuple(sorted((it.fp, it.url_fp) for it in group)))
            for item in group:
                add_evidence(found, item.url_fp, Evidence(crowded=True))
        elif len(group) > 1:
            pairs += _round_pairs(group, found, max_distance)
    for _ in rows:
        pass
    # The closest stored original, ties to the first in URL order: compact cells are named first.
    unnamed = sorted({original for _, _, original, url in matches if url is None})
    named = names(unnamed) if unnamed and names is not None else {}
    best: dict[int, tuple[int, str]] = {}
    for url_fp, d, original, url in matches:
        url = url if url is not None else named.get(original)
        if url is not None and (url_fp not in best or match_key((d, url)) < match_key(best[url_fp])):
            best[url_fp] = (d, url)
    for url_fp, match in best.items():
        add_evidence(found, url_fp, Evidence(stored=match))
    return found, crowded, compared, pairs


def _round_pairs(group: Sequence[Keyed], found: dict[int, Evidence], max_distance: int) -> int:
    """Adds this round's near pairs within one row (every pair: the order does not matter);
    returns how many pairs were checked."""
    checked = 0
    for a in range(len(group)):
        for b in range(a + 1, len(group)):
            checked += 1
            first, second = group[a], group[b]
            if first.url_fp == second.url_fp:
                continue
            d = textfp.hamming(first.fp, second.fp)
            if d <= max_distance:
                add_evidence(found, first.url_fp, Evidence(neighbours=frozenset({(second.url_fp, d)})))
                add_evidence(found, second.url_fp, Evidence(neighbours=frozenset({(first.url_fp, d)})))
    return checked


def crowded_pairs(
    members: Sequence[tuple[int, int]],
    names: Mapping[int, str],
    neighbours: dict[int, set[tuple[int, int]]],
    max_distance: int,
    max_pairwise: int,
) -> int:
    """A crowded row's pairs: in URL order, each candidate is compared with the row's first
    originals only (at most ``max_pairwise`` of them), not pair by pair."""
    ordered = sorted(
        ((fp, url_fp) for fp, url_fp in members if url_fp in names),
        key=lambda m: (order_key(names[m[1]]), m[1], m[0]),
    )
    against: list[tuple[int, int]] = []
    checked = 0
    for fp, url_fp in ordered:
        matched = False
        for first_fp, first_url_fp in against:
            checked += 1
            if first_url_fp == url_fp:
                continue
            d = textfp.hamming(first_fp, fp)
            if d > max_distance:
                continue
            neighbours.setdefault(first_url_fp, set()).add((url_fp, d))
            neighbours.setdefault(url_fp, set()).add((first_url_fp, d))
            matched = True
        if not matched and len(against) < max_pairwise:
            against.append((fp, url_fp))
    return checked
