"""Which simhash tables a store keeps: the layout is part of the stored keys, so a store keeps
the one its first round chose, recorded in its ``meta`` table (docs/ARCHITECTURE.md §2).

A store that records none chooses when a round is built: if it already holds simhash rows,
the layout whose keys they have (rows written before layouts were recorded have the 20-table
layout's, :data:`~beamcrawl.core.content.textfp.LAYOUT`: one table byte and five of prefix;
the ten tables' have four), else its own kind's
(:attr:`Store.simhash_tables <beamcrawl.stores.interface.Store.simhash_tables>`: 10 for the
embedded store, 20 for Bigtable). The choice is recorded by a check-and-set, so two launches
that race agree on the first one written.
"""

from __future__ import annotations

from beamcrawl.core.content import textfp
from beamcrawl.stores.base import Store, StoreError

META_TABLE = "meta"
SIMHASH_TABLE = "simhash"
#: The ``meta`` row and cell that record the layout (:func:`textfp.layout_name`).
LAYOUT_KEY = b"simhash"
LAYOUT_CELL = "m:layout"


def recorded_layout(store: Store) -> textfp.TableLayout | None:
    """The layout ``store`` recorded, or None.

    Raises:
        StoreError: The recorded value is not a layout (a damaged or foreign ``meta`` row).
    """
    raw = store.read_keys(META_TABLE, [LAYOUT_KEY]).get(LAYOUT_KEY, {}).get(LAYOUT_CELL)
    if raw is None:
        return None
    try:
        return textfp.parse_layout(raw.decode("ascii", "replace"))
    except ValueError as exc:
        raise StoreError(f"store {store.uri}: meta row 'simhash': {exc}") from None


def default_layout(store: Store) -> textfp.TableLayout:
    """The layout ``store`` would choose now: that of the simhash rows it holds (by their
    keys' length; the 20 tables' for any other), else its kind's own."""
    for key, _ in store.read_range(SIMHASH_TABLE, limit=1, keys_only=True):
        return _BY_KEY_LENGTH.get(len(key), textfp.LAYOUT)
    return textfp.LAYOUTS.get(store.simhash_tables, textfp.LAYOUT)


# A table byte, then the layout's prefix bytes: 6 for twenty tables, 5 for ten.
_BY_KEY_LENGTH = {1 + layout.key_bytes: layout for layout in textfp.LAYOUTS.values()}
assert len(_BY_KEY_LENGTH) == len(textfp.LAYOUTS)


def simhash_layout(store: Store, *, record: bool = True) -> textfp.TableLayout:
    """The layout of ``store``'s simhash tables: the one it recorded, else the one it
    chooses now (recorded, unless ``record`` is False: a job that writes no simhash rows
    leaves the choice to one that does, which makes the same one).

    Raises:
        StoreError: The recorded value is not a layout, or the record could not be made.
    """
    for _ in range(2):
        found = recorded_layout(store)
        if found is not None:
            return found
        chosen = default_layout(store)
        if not record:
            return chosen
        if store.check_and_set(META_TABLE, LAYOUT_KEY, LAYOUT_CELL, None, textfp.layout_name(chosen).encode()):
            return chosen
        # another launch recorded one first: read it
    raise StoreError(f"store {store.uri}: the simhash table layout could not be recorded in meta row 'simhash'")
