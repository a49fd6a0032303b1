"""Opening a store by its URI; the store interface's names, re-exported so callers import one module.

The interface itself (tables, families, :class:`Store`, :class:`Mutation`, the argument checks
every backend shares) is :mod:`beamcrawl.stores.interface`, which the backends import; this
module picks a backend by the URI's scheme and imports it only then, so that a quick command
never loads the Cloud Bigtable client it does not use.
"""

from __future__ import annotations

from beamcrawl.stores.interface import (
    ESTIMATE_EXACT_ROWS,
    FAMILIES,
    TABLES,
    Cell,
    Cells,
    Mutation,
    Row,
    Store,
    StoreError,
    check_bound,
    check_column,
    check_key,
    check_table,
    check_value,
)

__all__ = [
    "Cell",
    "Cells",
    "ESTIMATE_EXACT_ROWS",
    "FAMILIES",
    "Mutation",
    "Row",
    "STORE_FORMS",
    "Store",
    "StoreError",
    "TABLES",
    "check_bound",
    "check_column",
    "check_key",
    "check_store_uri",
    "check_table",
    "check_value",
    "open_store",
]

STORE_FORMS = "sqlite:///PATH, a folder, or bigtable://PROJECT/INSTANCE[/PREFIX]"
_SCHEMES = ("sqlite", "bigtable")


def check_store_uri(uri: str) -> str:
    """Returns ``uri`` if it names a store this crawler can open.

    A plain path is the embedded store; anything else with a ``scheme://`` must be one of
    ``sqlite://`` and ``bigtable://`` (``mysql://x`` or ``gs://b/x`` would otherwise become
    a local folder named ``mysql:``).

    Raises:
        StoreError: An unknown scheme, naming the accepted forms.
    """
    scheme, sep, _ = uri.partition("://")
    if sep and scheme.lower() not in _SCHEMES:
        raise StoreError(f"unknown store {uri!r}: the store is one of {STORE_FORMS}")
    return uri


def open_store(uri: str) -> Store:
    """Opens the store named by ``uri``.

    ``sqlite:///path/to/file.sqlite`` or a plain directory or file path opens the embedded
    store; ``bigtable://PROJECT/INSTANCE[/TABLE_PREFIX]`` opens Cloud Bigtable.

    Raises:
        StoreError: An unknown scheme, or the store cannot be opened.
    """
    check_store_uri(uri)
    if uri.startswith("bigtable://"):
        try:
            from beamcrawl.stores.bigtable import BigtableStore
        except ImportError as exc:  # google-cloud-bigtable missing or broken in this environment
            raise StoreError(f"bigtable store is not available: {exc}") from exc
        return BigtableStore.from_uri(uri)
    from beamcrawl.stores.embedded import EmbeddedStore

    return EmbeddedStore.from_uri(uri)
