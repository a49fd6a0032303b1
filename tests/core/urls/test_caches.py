"""The URL modules' caches are emptied whole by their ``clear_caches``: a cache added to a
module and forgotten there would keep pinning a round's memory (bench/README.md, "The URL
caches pin the fetch stage's memory")."""

from __future__ import annotations

from types import ModuleType

import pytest
from url_caches import fill_url_caches, module_caches

from beamcrawl.core.urls import hostkeys, urlnorm


@pytest.mark.parametrize("module", [urlnorm, hostkeys], ids=lambda m: m.__name__.rpartition(".")[2])
def test_clear_caches_empties_every_cache_of_the_module(module: ModuleType) -> None:
    caches = module_caches(module)
    assert len(caches) >= 3
    fill_url_caches()
    assert [c.__name__ for c in caches if not c.cache_info().currsize] == []
    module.clear_caches()
    assert {c.__name__: c.cache_info().currsize for c in caches} == {c.__name__: 0 for c in caches}
    # Cleared, they fill again and answer as before.
    assert urlnorm.normalize("../b/c?d=1", "http://Example.COM:8080/a/x.html") == "http://example.com:8080/b/c?d=1"
    assert hostkeys.domain_of("www.example.co.uk") == "example.co.uk"
