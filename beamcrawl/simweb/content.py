"""Deterministic page bodies for the synthetic web.

Bodies are rendered on demand from a :class:`~beamcrawl.simweb.site.PageModel` and a text seed.
All randomness comes from :class:`random.Random` seeded with a string, which Python hashes with
SHA-512, so bodies are identical across processes and runs (``PYTHONHASHSEED`` plays no part).
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from beamcrawl.simweb.site import PageModel

__all__ = ["VOCABULARY", "render_page", "render_paragraphs", "render_pdf", "words"]

# Exactly 256 words, so one random byte picks one word: a paragraph costs one randbytes() call
# instead of a Python-level draw per word (page generation is on the server's hot path).
VOCABULARY: tuple[str, ...] = tuple(
    """
    able about above across action active actual address after again against agent almost along
    already also always amount analysis answer archive around article assume attempt audience
    author balance basic become before begin behind belief benefit better between beyond board
    border bridge brief budget build button cable camera capital carbon career carry central
    chance change channel chapter charge choice circle claim class clear climate close coast
    collect column common control corner county couple course cover craft credit crowd culture
    current custom cycle damage danger dealer debate decade decide deliver demand design detail
    device differ digital direct doctor double driver early effort eight either energy engine
    enough entire equal escape estate event evidence exact expand expert factor family field
    figure final finger flight focus follow forest formal frame friend front future garden
    gather general gentle global golden ground growth guide handle harbor health height hidden
    history holder honest house human ideal image impact inside island issue journal judge
    kitchen label ladder language large latest layer leader legal letter level light limit
    linear liquid little local logic lower machine manner margin market master matter medium
    member memory method middle minute mirror mobile modern moment motion museum native nature
    network normal notice number object office orange origin output owner parent partner pattern
    people period person picture planet player pocket policy powder power prefer press price
    profit proper quality quarter quick random range rapid rather reader reason record region
    relay remote report result return review river robust rocket route rural sample scale screen
    search season second select series settle shadow signal
    """.split()
)
assert len(VOCABULARY) == 256


def _between(rng: random.Random, low: int, high: int) -> int:
    """Draw an int in ``low..high`` with one ``random()`` call (cheaper than ``randint``)."""
    return low + int(rng.random() * (high - low + 1))


def words(rng: random.Random, count: int) -> list[str]:
    """Draw ``count`` words from :data:`VOCABULARY`, one random byte each."""
    return [VOCABULARY[b] for b in rng.randbytes(count)]


def _sentence_case(text_words: list[str]) -> str:
    text = " ".join(text_words)
    return text[:1].upper() + text[1:] + "."


def render_paragraphs(rng: random.Random, count: int, low: int, high: int) -> list[list[str]]:
    """Draw ``count`` paragraphs of ``low``..``high`` words each.

    Args:
        rng: The text random stream.
        count: How many paragraphs.
        low: Fewest words in a paragraph.
        high: Most words in a paragraph.

    Returns:
        The paragraphs as word lists (not yet joined, so links can be spliced in).
    """
    return [words(rng, _between(rng, low, high)) for _ in range(count)]


def _anchor(href: str, text: str, nofollow: bool, style: int) -> str:
    # Markup varies the way real pages do, so the crawler's HTML parser meets each form:
    # double quotes, single quotes, upper-case tags and attributes, and multi-token rel values.
    rel = ""
    if nofollow:
        rel = ' rel="nofollow"' if style % 2 == 0 else ' rel="external nofollow"'
    if style == 1:
        return f"<a href='{href}'{rel}>{text}</a>"
    if style == 2:
        return f'<A HREF="{href}"{rel}>{text}</A>'
    return f'<a href="{href}"{rel}>{text}</a>'


def render_page(model: PageModel, text_key: str) -> bytes:
    """Render one HTML page.

    Args:
        model: The page's structure (links, base, canonical, meta robots).
        text_key: Seed string of the text stream; exact duplicates share it with their original,
            so they render byte for byte the same.

    Returns:
        The UTF-8 HTML body, a few KB.
    """
    rng = random.Random(text_key)
    title = " ".join(w.capitalize() for w in words(rng, _between(rng, 3, 6)))
    paragraphs = render_paragraphs(rng, _between(rng, 4, 7), 40, 90)
    if model.near:
        # A near duplicate differs from its original by one word: close in simhash, not equal.
        paragraphs[0][min(3, len(paragraphs[0]) - 1)] = "altered"
    # Splice anchors into the running text at random positions; later insertions go in front of
    # earlier ones, which keeps every drawn position valid.
    for link in model.links:
        para = paragraphs[int(rng.random() * len(paragraphs))]
        text = " ".join(words(rng, _between(rng, 1, 3)))
        anchor = _anchor(link.href, text, link.nofollow, link.style)
        para.insert(_between(rng, 0, len(para)), anchor)
    head = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{title}</title>",
    ]
    if model.base_href is not None:
        head.append(f'<base href="{model.base_href}">')
    if model.canonical is not None:
        head.append(f'<link rel="canonical" href="{model.canonical}">')
    if model.meta_robots is not None:
        head.append(f'<meta name="robots" content="{model.meta_robots}">')
    body = ["</head>", "<body>", f"<h1>{title}</h1>"]
    body.extend(f"<p>{_sentence_case(p)}</p>" for p in paragraphs)
    body.extend(["<footer>Generated by simweb.</footer>", "</body>", "</html>", ""])
    return "\n".join(head + body).encode("utf-8")


def render_pdf(text_key: str) -> bytes:
    """Render a small deterministic stand-in for a PDF file (not a valid PDF, just the magic).

    Args:
        text_key: Seed string of the text stream.

    Returns:
        A few hundred bytes starting with ``%PDF-1.4``.
    """
    rng = random.Random(text_key)
    text = " ".join(words(rng, 60))
    return f"%PDF-1.4\n% simweb placeholder\n({text})\n%%EOF\n".encode("ascii")
