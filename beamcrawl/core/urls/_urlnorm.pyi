"""Types of the compiled normalisation of plain links (``_urlnorm.c``)."""

from collections.abc import Callable

def normalize(
    url: str,
    base: str | None,
    authority: Callable[[str, str], str],
    dropped: tuple[str, ...],
    /,
) -> str | None: ...
