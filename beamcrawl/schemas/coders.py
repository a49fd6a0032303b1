"""Beam coders for the record types that cross a round's shuffles (schemas/records.py), and
for the batches of pages (and what each stage makes of one) after content seen.

A ``@shuffled`` record pickles as its class and a tuple of its field values, and a
:class:`~beamcrawl.schemas.records.Packed` list of them as the class once and a row of
values per record: fast, but to Beam such an element is ``Any``, encoded by its fallback
coder (a type byte, then the pickle). :class:`RecordCoder` and :class:`PackedCoder` are
registered for those types, so that a transform that declares its output type
(``with_output_types``) tells the runner, and a reader of the graph, what its elements are.
A record's coder knows its class, so it writes only the field values: the bytes are
today's pickle without the class's name. Nothing encoded this way outlives the job that
wrote it.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

import apache_beam as beam

from beamcrawl.schemas import records
from beamcrawl.schemas.candidate_block import CandidateBlock, CandidateBlockCoder
from beamcrawl.schemas.probe_block import ProbeBlock, ProbeBlockCoder
from beamcrawl.schemas.due_rows import DueRows

__all__ = ["BatchCoder", "DueRowsCoder", "PackedCoder", "RecordCoder", "register"]

# Items whose pickled size stands for a whole batch's in a size estimate (spread over it).
SIZE_SAMPLE = 8

_VALUES = b"\x00"  # then the pickled tuple of the record's field values
_OTHER = b"\x01"  # then the pickled value: anything else a transform emitted under the type


class RecordCoder(beam.coders.Coder):
    """A ``@shuffled`` record of one class as the pickle of its field values."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self._values = records.field_values(cls)

    def encode(self, value: Any) -> bytes:
        if type(value) is self.cls:
            return _VALUES + pickle.dumps(self._values(value), pickle.HIGHEST_PROTOCOL)
        return _OTHER + pickle.dumps(value, pickle.HIGHEST_PROTOCOL)

    def decode(self, encoded: bytes) -> Any:
        value = pickle.loads(encoded[1:])
        return self.cls(*value) if encoded[:1] == _VALUES else value

    def is_deterministic(self) -> bool:
        return False  # pickle's bytes are not a key's: never a grouping key

    def to_type_hint(self) -> type:
        return self.cls

    @classmethod
    def from_type_hint(cls, typehint: Any, registry: Any) -> RecordCoder:  # type: ignore[override]
        return cls(typehint)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.cls is self.cls

    def __hash__(self) -> int:
        return hash((type(self), self.cls))


class PackedCoder(beam.coders.Coder):
    """A :class:`~beamcrawl.schemas.records.Packed` list as its own pickle (the class of its
    records once, a row of values each)."""

    def encode(self, value: Any) -> bytes:
        return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)

    def decode(self, encoded: bytes) -> Any:
        return pickle.loads(encoded)

    def is_deterministic(self) -> bool:
        return False

    def to_type_hint(self) -> type:
        return records.Packed


class DueRowsCoder(beam.coders.Coder):
    """:class:`~beamcrawl.schemas.due_rows.DueRows` as its row count and its bytes: encoding
    and decoding copy them. Equal to any other (Beam's ``Coder`` compares class and state)."""

    _COUNT = struct.Struct("<Q")

    def encode(self, value: DueRows) -> bytes:
        return self._COUNT.pack(value.count) + value.blob

    def decode(self, encoded: bytes) -> DueRows:
        (count,) = self._COUNT.unpack_from(encoded)
        return DueRows(encoded[8:], count)

    def estimate_size(self, value: DueRows) -> int:
        return 8 + len(value.blob)

    def is_deterministic(self) -> bool:
        return True

    def to_type_hint(self) -> type:
        return DueRows


def _sampled_size(items: list[Any]) -> int:
    """The pickled size of ``items``, estimated from at most :data:`SIZE_SAMPLE` of them."""
    n = len(items)
    if n == 0:
        return 8
    step = max(1, n // SIZE_SAMPLE)
    sample = items[::step][:SIZE_SAMPLE]
    # Pickled together, as the whole list is (repeated keys and classes are written once).
    return 8 + len(pickle.dumps(records.Packed(sample), pickle.HIGHEST_PROTOCOL)) * n // len(sample)


class BatchCoder(beam.coders.Coder):
    """A batch of the stages after content seen: a :class:`~beamcrawl.schemas.records.PageBatch`
    (its pages pickled as one :class:`~beamcrawl.schemas.records.Packed` list) or a
    :class:`~beamcrawl.schemas.records.Batched` list, as its own pickle.

    Its size estimate pickles a few items and scales: a runner estimates the size of the first
    elements of every PCollection (Beam samples the first ten, then about 10/N), a round's
    batches are that few, and encoding each whole in every step that passed it on cost some
    180 µs a page, more than the steps' own per-page work saved by batching.
    """

    def __init__(self, cls: type = records.PageBatch) -> None:
        self.cls = cls

    def encode(self, value: Any) -> bytes:
        if type(value) is records.PageBatch:
            return _VALUES + pickle.dumps(records.Packed(value.pages), pickle.HIGHEST_PROTOCOL)
        return _OTHER + pickle.dumps(value, pickle.HIGHEST_PROTOCOL)

    def decode(self, encoded: bytes) -> Any:
        value = pickle.loads(encoded[1:])
        return records.PageBatch(list(value)) if encoded[:1] == _VALUES else value

    def estimate_size(self, value: Any) -> int:
        items = value.pages if type(value) is records.PageBatch else value
        return _sampled_size(items) if isinstance(items, list) else len(self.encode(value))

    def is_deterministic(self) -> bool:
        return False

    def to_type_hint(self) -> type:
        return self.cls

    @classmethod
    def from_type_hint(cls, typehint: Any, registry: Any) -> BatchCoder:  # type: ignore[override]
        return cls(typehint)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.cls is self.cls

    def __hash__(self) -> int:
        return hash((type(self), self.cls))


def register() -> None:
    """Registers the coders with Beam's registry (done when this module is imported): one
    for each ``@shuffled`` record of schemas/records.py, one for ``Packed``, URL seen's
    columnar ``CandidateBlock`` (schemas/candidate_block.py), the select's ``DueRows``
    (schemas/due_rows.py), and the batches of the stages
    after content seen (``PageBatch``, ``Batched``)."""
    for cls in records.shuffled_classes():
        if cls.__module__ == records.__name__:
            beam.coders.registry.register_coder(cls, RecordCoder)
    beam.coders.registry.register_coder(records.Packed, PackedCoder)
    beam.coders.registry.register_coder(CandidateBlock, CandidateBlockCoder)
    beam.coders.registry.register_coder(ProbeBlock, ProbeBlockCoder)
    beam.coders.registry.register_coder(DueRows, DueRowsCoder)
    beam.coders.registry.register_coder(records.PageBatch, BatchCoder)
    beam.coders.registry.register_coder(records.Batched, BatchCoder)


register()
