"""Types of the compiled tokenizer and walk of the parse limits' pre-scan (``_htmltags.c``)."""

from typing import Callable

#: The names the walk knows by number, first in the numbers it is given.
WALK_NAMES: tuple[str, ...]
#: The sets of htmlbounds, by name, in the order of their bits in the walk's flags.
WALK_SETS: tuple[str, ...]

def tags(text: str, most: int = -1, /) -> list[tuple[str, str, str, str]]: ...
def long_attributes(text: str, longer_than: int, /) -> list[str]: ...
def tag_offset(text: str, number: int, /) -> int: ...
def walk(
    tokens: list[tuple[str, str, str, str]],
    following: bool,
    ids: dict[str, int],
    names: tuple[str, ...],
    flags: tuple[int, ...],
    max_elements: int,
    max_depth: int,
    max_attributes: int,
    max_tags: int,
    attribute_count: Callable[[str], int],
    /,
) -> tuple[int, str | None, int, int]: ...
