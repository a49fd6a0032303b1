"""URL seen's combine and merge as they were before they were vectorised (at 10d4d8d): one
dict lookup and one ``Candidate.merge`` per offer, then a merge join that compares 8-byte
keys one candidate at a time.

Kept only as the reference the numpy versions in ``transforms/url_seen.py`` are checked
against (``test_url_seen.py``) and timed against (``bench/seen_merge.py``); nothing in the
package uses it.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

from beamcrawl.schemas.records import Candidate, fp_key


def combine_candidates(groups: Iterable[Iterable[Candidate]]) -> dict[int, Candidate]:
    """Combines offers per fingerprint: in-links add up, the best priority wins."""
    combined: dict[int, Candidate] = {}
    for group in groups:
        for cand in group:
            kept = combined.get(cand.fp)
            combined[cand.fp] = cand if kept is None else kept.merge(cand)
    return combined


def merge_unseen(sorted_candidates: Sequence[Candidate], stored_keys: Iterable[bytes]) -> Iterator[Candidate]:
    """Yields the candidates whose fingerprint is not among ``stored_keys`` (both sorted)."""
    keys = iter(stored_keys)
    current = next(keys, None)
    for cand in sorted_candidates:
        target = fp_key(cand.fp)
        while current is not None and current < target:
            current = next(keys, None)
        if current == target:
            continue
        yield cand
    for _ in keys:
        pass
