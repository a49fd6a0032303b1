"""One module per stage of a round, each a composite PTransform over plain functions."""
