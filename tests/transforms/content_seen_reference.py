"""Content seen's near-copy join as it was before its items carried URL fingerprints (at
9f54105): every simhash item carried its page's URL, evidence was keyed by URL, and every
one of an original's 20 simhash cells named its URL (:func:`simhash_cells`, the format of
rows existing crawls hold).

Kept only as the reference the new item shape is checked against
(``test_content_seen.py``, ``test_fingerprint_items_decide_as_url_items_did``); nothing in
the package uses it. ``max_pairwise`` is an argument here so the test can reach crowded rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable, Mapping, NamedTuple, Sequence

from beamcrawl.core.content import textfp
from beamcrawl.stores.base import Mutation
from beamcrawl.transforms.content_seen import Probe
from beamcrawl.transforms.near_copies import MAX_PAIRWISE, order_key
from beamcrawl.state.content_rows import SIMHASH_FAMILY, counts_in_round


@dataclass(frozen=True)
class Evidence:
    """What the simhash join found for one candidate original.

    Attributes:
        url: The candidate.
        stored: ``(distance, url)`` of the closest original kept in an earlier round, if any.
        neighbours: ``(url, distance)`` of this round's candidates within the distance.
    """

    url: str
    stored: tuple[int, str] | None = None
    neighbours: frozenset[tuple[str, int]] = field(default_factory=frozenset)

    def merge(self, other: "Evidence") -> "Evidence":
        stored = self.stored
        if other.stored is not None and (stored is None or _match_key(other.stored) < _match_key(stored)):
            stored = other.stored
        return Evidence(self.url, stored, self.neighbours | other.neighbours)


def _match_key(match: tuple[int, str]) -> tuple[int, tuple[int, int, str]]:
    distance, url = match
    return distance, order_key(url)


class _Item(NamedTuple):
    """One candidate in one permuted table (20 per page, one per table). They cross the
    table-bucket shuffle as plain tuples, which pickle several times faster than a named
    tuple or a dataclass."""

    key: bytes
    permuted: int
    fp: int
    url: str


def parse_simhash_cells(cells: Mapping[str, bytes], round_no: int | None) -> list[tuple[int, str]]:
    """``(fingerprint, url)`` of the originals stored in one row that count this round."""
    out = []
    for column, raw in cells.items():
        qualifier = column.partition(":")[2]
        value = json.loads(raw)
        if counts_in_round(value.get("round"), round_no):
            out.append((int(qualifier[:16], 16), value["url"]))
    return out


def merge_prefix_rows(
    items: Sequence[_Item],
    stored_rows: Iterable[tuple[bytes, Mapping[str, bytes]]],
    round_no: int | None = None,
    max_distance: int = textfp.MAX_DISTANCE,
    max_pairwise: int = MAX_PAIRWISE,
) -> tuple[dict[str, Evidence], int, int]:
    """Merges one bucket's candidates, sorted by key, against the stored rows of their keys.

    Args:
        items: The candidates in one permuted table, sorted by row key.
        stored_rows: Stored ``(key, cells)`` in key order (may include keys no candidate has).
        round_no: This round (newer rows are ignored).
        max_distance: Most differing bits of a near copy.

    Returns:
        ``(evidence by url, stored fingerprints compared, round pairs compared)``; only
        candidates with a stored match or a neighbour appear.
    """
    found: dict[str, Evidence] = {}
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
                best: tuple[int, str] | None = None
                for fp, url in originals:
                    compared += 1
                    if url == item.url:
                        continue  # its own earlier fingerprint: the same page, changed a little
                    d = textfp.hamming(item.fp, fp)
                    if d <= max_distance and (best is None or _match_key((d, url)) < _match_key(best)):
                        best = (d, url)
                if best is not None:
                    _add(found, Evidence(item.url, stored=best))
        if len(group) > 1:
            pairs += _round_pairs(group, found, max_distance, max_pairwise)
    for _ in rows:
        pass
    return found, compared, pairs


def _add(found: dict[str, Evidence], evidence: Evidence) -> None:
    kept = found.get(evidence.url)
    found[evidence.url] = evidence if kept is None else kept.merge(evidence)


def _round_pairs(group: Sequence[_Item], found: dict[str, Evidence], max_distance: int, max_pairwise: int) -> int:
    """Adds this round's near pairs within one row; returns how many pairs were checked."""
    ordered = sorted(group, key=lambda it: order_key(it.url))
    checked = 0
    if len(ordered) <= max_pairwise:
        for a in range(len(ordered)):
            for b in range(a + 1, len(ordered)):
                checked += 1
                _pair(ordered[a], ordered[b], found, max_distance)
        return checked
    # Degenerate row: compare each candidate with the row's first originals only.
    against: list[_Item] = []
    for item in ordered:
        matched = False
        for first in against:
            checked += 1
            matched |= _pair(first, item, found, max_distance)
        if not matched and len(against) < max_pairwise:
            against.append(item)
    return checked


def _pair(a: _Item, b: _Item, found: dict[str, Evidence], max_distance: int) -> bool:
    if a.url == b.url:
        return False
    d = textfp.hamming(a.fp, b.fp)
    if d > max_distance:
        return False
    _add(found, Evidence(a.url, neighbours=frozenset({(b.url, d)})))
    _add(found, Evidence(b.url, neighbours=frozenset({(a.url, d)})))
    return True


def resolve_round(candidates: Iterable[Evidence]) -> list[tuple[str, tuple[str, int]]]:
    """Decides which of this round's mutually near candidates are copies.

    In :func:`order_key` order, a candidate is a near copy of the closest earlier candidate
    that is itself an original; with none, it is an original. Candidates with a stored match
    are copies already and must not be passed in (they cannot be anyone's original).

    Returns:
        ``(url, (original url, distance))`` for each candidate found to be a copy.
    """
    by_url = {e.url: e for e in candidates}
    originals: set[str] = set()
    out: list[tuple[str, tuple[str, int]]] = []
    for url in sorted(by_url, key=order_key):
        mine = order_key(url)
        earlier = [(d, order_key(n), n) for n, d in by_url[url].neighbours if n in originals and order_key(n) < mine]
        if earlier:
            d, _, original = min(earlier)
            out.append((url, (original, d)))
        else:
            originals.add(url)
    return out


def simhash_cells(probe: Probe, round_no: int | None, layout: textfp.TableLayout = textfp.LAYOUT) -> list[Mutation]:
    """The mutations that record an original's simhash in every permuted table."""
    assert probe.simhash is not None
    column = f"{SIMHASH_FAMILY}:{probe.simhash:016x}{probe.url_fp:016x}"
    value = json.dumps({"url": probe.url, "round": round_no}, separators=(",", ":")).encode()
    cells = {column: value}  # one dict for the 20 rows: the store only reads it
    return [Mutation(key=key, cells=cells) for key in layout.keys_of(probe.simhash)]
