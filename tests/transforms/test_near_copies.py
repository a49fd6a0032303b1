"""The near-copy search's records and pure functions (``transforms/near_copies.py``): the
order of originals, a bucket's merge against stored rows and within itself, crowded rows, the
in-round resolution; and the numpy merges against the per-pair ones they replaced
(``content_seen_merge_reference``). The stage that wires them: ``test_content_seen.py``."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

import content_seen_merge_reference as per_pair
from beamcrawl.core.content import textfp
from beamcrawl.core.urls.urlnorm import fingerprint
from beamcrawl.schemas.records import Probe
from beamcrawl.state.content_rows import SIMHASH_FAMILY, simhash_cells
from beamcrawl.transforms.near_copies import (
    Evidence,
    Item,
    Keyed,
    crowded_pairs,
    key_items,
    merge_prefix_rows,
    order_key,
    resolve_round,
)


def original(url: str, simhash: int) -> Probe:
    """A stored original's probe: what its simhash rows are written from."""
    return Probe(url, fingerprint(url), 1, simhash, 1.0, f"sha1:{url}", "")


def test_order_key_prefers_no_query_then_short_then_small():
    urls = ["http://b.com/a?print=1", "http://bb.com/a", "http://b.com/a", "http://a.com/a"]
    assert sorted(urls, key=order_key) == [
        "http://a.com/a",
        "http://b.com/a",
        "http://bb.com/a",
        "http://b.com/a?print=1",
    ]


def test_stored_prefix_rows_give_the_closest_original_but_never_the_page_itself():
    fp = 0xF0F0_0000_0000_0000
    keys = {t: textfp.table_key(t, textfp.permute(fp, t)) for t in range(20)}
    t = 0
    items, _ = key_items(t, [Item(fp, fingerprint("http://new.com/"))])
    assert items[0].key == keys[t]
    row_cells = {}
    for other, url, rnd in (
        (fp ^ 0b111, "http://far3.com/", 1),
        (fp ^ 0b1, "http://close.com/", 1),
        (fp, "http://new.com/", 1),
        (fp, "http://later.com/", 5),
    ):
        for m in simhash_cells(original(url, other), rnd):
            if m.key == keys[t]:
                row_cells.update(m.cells or {})
    found, crowded, compared, _ = merge_prefix_rows(items, [(b"\x00", {}), (keys[t], row_cells)], round_no=2)
    assert compared == 3  # the round-5 row is not read as an original
    assert found == {fingerprint("http://new.com/"): Evidence(stored=(1, "http://close.com/"))}
    assert crowded == []


def test_round_pairs_in_a_shared_row():
    fp = 0x1234_5678_9ABC_DEF0
    t = 0  # leading blocks 0, 1, 2: bits 0-1 (block 5) stay in the row, bit 40 (block 2) leaves it
    a, b, c = (fingerprint(u) for u in ("http://a.com/", "http://b.com/", "http://c.com/"))
    items, _ = key_items(t, [Item(fp, a), Item(fp ^ 0b11, b), Item(fp ^ (1 << 40), c)])
    found, crowded, _, pairs = merge_prefix_rows(items, [])
    assert pairs >= 1 and crowded == []
    assert (b, 2) in found[a].neighbours
    assert (a, 2) in found[b].neighbours
    assert c not in found


def test_a_crowded_row_is_named_before_its_pairs_are_found():
    fp = 0x1234_5678_9ABC_DEF0
    urls = [f"http://h{i}.com/story" for i in range(5)]
    fps = [fingerprint(u) for u in urls]
    items, _ = key_items(0, [Item(fp ^ (1 << i), f) for i, f in enumerate(fps)])
    found, crowded, _, pairs = merge_prefix_rows(items, [], max_pairwise=3)
    assert (
        pairs == 0 and len(crowded) == 1 and sorted(crowded[0]) == sorted((fp ^ (1 << i), f) for i, f in enumerate(fps))
    )
    assert all(found[f] == Evidence(crowded=True) and found[f].pending for f in fps)
    named = [(u, f, found[f]) for u, f in zip(urls, fps)]
    # In URL order h0 is the row's first original; the others are compared with it only.
    assert sorted(resolve_round(named, crowded, max_pairwise=3)) == sorted((f, (urls[0], 2)) for f in fps[1:])


def test_resolve_round_keeps_the_first_original_and_breaks_chains():
    a, b, c, d = "http://a.com/", "http://b.com/", "http://c.com/", "http://d.com/?x"
    fa, fb, fc, fd = (fingerprint(u) for u in (a, b, c, d))
    named = [
        (a, fa, Evidence(neighbours=frozenset({(fb, 2)}))),
        (b, fb, Evidence(neighbours=frozenset({(fa, 2), (fc, 3)}))),
        (c, fc, Evidence(neighbours=frozenset({(fb, 3), (fd, 1)}))),  # not near a: a chain
        (d, fd, Evidence(neighbours=frozenset({(fc, 1)}))),
    ]
    # b copies a; c's only earlier neighbour b is a copy, so c is an original; d copies c.
    assert resolve_round(named) == [(fb, (a, 2)), (fd, (c, 1))]
    assert resolve_round(reversed(named)) == resolve_round(named)


# --- the numpy merges decide as the per-pair ones did -------------------------------------


def _near(rnd: random.Random, fp: int, most: int = 4) -> int:
    for bit in rnd.sample(range(64), rnd.randrange(most + 1)):
        fp ^= 1 << bit
    return fp


@st.composite
def prefix_buckets(draw):
    """One table bucket's items, sorted by key, and stored rows under some of their keys:
    simhashes clustered around a few bases (0–4 bits apart, so pairs fall on both sides of
    3), URL fingerprints repeated (a page's own earlier fingerprint), rows of up to 70
    candidates (crowded above ``max_pairwise``), stored originals of earlier, this and
    later rounds, in named and compact cells, some unnameable."""
    rnd = draw(st.randoms(use_true_random=False))
    bases = [rnd.getrandbits(64) for _ in range(draw(st.integers(1, 4)))]
    keys = sorted({bytes([0]) + rnd.getrandbits(40).to_bytes(5, "big") for _ in range(draw(st.integers(1, 6)))})
    url_fps = [rnd.getrandbits(64) for _ in range(draw(st.integers(1, 40)))]
    items = []
    for key in keys:
        size = draw(st.sampled_from([1, 1, 2, 3, 5, 8, 70]))
        for _ in range(size):
            fp = _near(rnd, rnd.choice(bases)) if rnd.random() < 0.9 else rnd.getrandbits(64)
            items.append(Keyed(key, fp, rnd.choice(url_fps)))
    stored: dict[bytes, dict[str, bytes]] = {}
    known: dict[tuple[int, int], str] = {}
    for key in keys + [b"\x00" * 6, b"\x00\xff\xff\xff\xff\xff"]:
        for _ in range(draw(st.integers(0, 4))):
            fp = _near(rnd, rnd.choice(bases))
            url = f"http://kept{rnd.randrange(6)}.com/{rnd.randrange(3)}" + ("?q" if rnd.random() < 0.3 else "")
            url_fp = rnd.choice(url_fps) if rnd.random() < 0.2 else fingerprint(url)
            mutations = simhash_cells(original(url, fp), rnd.choice((None, 1, 1, 2, 3)))
            cells = (mutations[0] if rnd.random() < 0.5 else mutations[1]).cells
            column = next(iter(cells))
            # the qualifier names this original (any URL fingerprint, own or not)
            cells = {f"{SIMHASH_FAMILY}:{fp:016x}{url_fp:016x}": cells[column]}
            stored.setdefault(key, {}).update(cells)
            if rnd.random() < 0.8:
                known[(fp, url_fp)] = url
    rows = sorted(stored.items())
    return items, rows, known, draw(st.sampled_from([2, 3, 64])), draw(st.integers(1, 3))


@settings(max_examples=150, deadline=None)
@given(prefix_buckets())
def test_numpy_prefix_merge_is_the_per_pair_merge(bucket):
    """Evidence (stored matches, neighbours, crowded), crowded rows and both counts as the
    per-pair merge gave them (``content_seen_merge_reference``)."""
    items, rows, known, max_pairwise, round_no = bucket

    def names(wanted):
        return {o: known[o] for o in wanted if o in known}

    kw = dict(round_no=round_no, max_pairwise=max_pairwise, names=names)
    assert merge_prefix_rows(items, iter(rows), **kw) == per_pair.merge_prefix_rows(items, iter(rows), **kw)


@settings(max_examples=150, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 150), st.sampled_from([1, 2, 3, 64]), st.integers(0, 3))
def test_numpy_crowded_pairs_are_the_per_pair_ones(rnd, n, max_pairwise, max_distance):
    """A crowded row's pairs, in URL order against its first originals, as before: the same
    neighbours and the same count of pairs checked, with members left unnamed and URL
    fingerprints shared."""
    bases = [rnd.getrandbits(64) for _ in range(rnd.randint(1, 4))]
    url_fps = [rnd.getrandbits(64) for _ in range(max(1, n))]
    members = [(_near(rnd, rnd.choice(bases)), rnd.choice(url_fps)) for _ in range(n)]
    names = {f: f"http://h{rnd.randrange(5)}.com/{rnd.randrange(9)}" for f in url_fps if rnd.random() < 0.9}
    new: dict[int, set] = {}
    old: dict[int, set] = {}
    got = crowded_pairs(members, names, new, max_distance, max_pairwise)
    assert got == per_pair.crowded_pairs(members, names, old, max_distance, max_pairwise)
    assert new == old
