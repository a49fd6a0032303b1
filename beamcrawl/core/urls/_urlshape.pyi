"""Types of the compiled URL-shape check (``_urlshape.c``)."""

def check(
    max_length: int,
    max_depth: int,
    max_segment_repeats: int,
    schemes: frozenset[str],
    rejected: frozenset[str],
    url: str,
    /,
) -> int: ...
