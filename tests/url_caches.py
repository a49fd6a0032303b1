"""The URL modules' caches, found and filled: for the tests that check they are emptied
(``clear_caches``, the parse's bundle end)."""

from __future__ import annotations

from types import ModuleType

from beamcrawl.core.urls import hostkeys, urlnorm


def module_caches(module: ModuleType) -> list:
    """Every function of ``module`` that keeps a ``functools`` cache."""
    return [
        value
        for value in vars(module).values()
        if callable(value) and hasattr(value, "cache_info") and getattr(value, "__module__", "") == module.__name__
    ]


def fill_url_caches() -> None:
    """A few calls that put an entry in every cache of both modules."""
    urlnorm.normalize("../b/c?d=1", "http://Example.COM:8080/a/x.html")
    urlnorm.normalize_host("Bücher.example")
    urlnorm.host_of("http://www.example.co.uk/")
    hostkeys.host_key("Example.COM.:8080")
    hostkeys.hostname_of("[::1]:8080")
    hostkeys.domain_of("www.example.co.uk")
