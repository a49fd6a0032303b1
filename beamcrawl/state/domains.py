"""The ``domains`` table's seeded mark: a seed's registered domain earns budget credit
(``--seed-domain-credit``); written by the crawl loop, read by the budget stages."""

from __future__ import annotations

from collections.abc import Iterable

from beamcrawl.core.urls.hostkeys import domain_of
from beamcrawl.stores.base import Mutation, Store

TABLE = "domains"
SEEDED = "d:seeded"
WRITE_BATCH = 2000


def credit_seed_domains(store: Store, hosts: Iterable[str]) -> None:
    """Marks the registered domains of seed hosts as seeded (``--seed-domain-credit``)."""
    domains = sorted({domain_of(h) for h in hosts})
    for i in range(0, len(domains), WRITE_BATCH):
        store.mutate(TABLE, [Mutation.set(d.encode(), {SEEDED: b"1"}) for d in domains[i : i + WRITE_BATCH]])
