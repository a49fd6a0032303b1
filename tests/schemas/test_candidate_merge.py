"""Offers of one URL combine to the same candidate whatever order they arrive in: bundles and
workers deliver them in another order on every run, and the frontier row must not follow."""

from __future__ import annotations

import functools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.schemas.records import Candidate

_offer = st.builds(
    Candidate,
    fp=st.just(42),
    url=st.just("http://a.test/x"),
    host=st.just("a.test"),
    depth=st.integers(0, 5),
    priority=st.sampled_from([0.1, 0.5, 0.5, 1.0]),  # ties are the point
    source=st.sampled_from(["link", "sitemap", "feed", "redirect", "seed"]),
    inlinks=st.integers(1, 3),
    inlink_hosts=st.lists(st.integers(0, 50), max_size=4, unique=True).map(lambda xs: tuple(sorted(xs))),
    kind=st.sampled_from(["page", "sitemap", "feed"]),
    hops=st.integers(0, 3),
    lastmod=st.none() | st.floats(0, 1e9, allow_nan=False),
    robots_origin=st.none() | st.sampled_from(["http://a.test", "https://a.test"]),
)


@settings(max_examples=200, deadline=None)
@given(offers=st.lists(_offer, min_size=2, max_size=6), seed=st.integers(0, 2**16))
def test_offers_combine_the_same_in_any_order(offers, seed):
    shuffled = list(offers)
    random.Random(seed).shuffle(shuffled)
    one = functools.reduce(Candidate.merge, offers)
    other = functools.reduce(Candidate.merge, shuffled)
    assert one == other
    assert one.priority == max(o.priority for o in offers)
    assert one.inlinks == sum(o.inlinks for o in offers)


def test_a_tie_in_priority_goes_to_the_same_source_either_way():
    a = Candidate(fp=1, url="u", host="h", depth=1, priority=0.5, source="link", kind="page")
    b = Candidate(fp=1, url="u", host="h", depth=2, priority=0.5, source="sitemap", kind="sitemap")
    assert a.merge(b) == b.merge(a)
    assert (a.merge(b).source, a.merge(b).kind, a.merge(b).depth) == ("sitemap", "sitemap", 1)
