"""Deterministic page bodies for the synthetic web.

Bodies are rendered on demand from a :class:`~beamcrawl.simweb.site.PageModel` and a text seed.
All randomness comes from :class:`random.Random` seeded with a string, which Python hashes with
SHA-512, so bodies are identical across processes and runs (``PYTHONHASHSEED`` plays no part).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from beamcrawl.simweb.names import registered_domain

if TYPE_CHECKING:
    from beamcrawl.simweb.site import PageModel

__all__ = ["VOCABULARY", "render_news_page", "render_page", "render_paragraphs", "render_pdf", "words"]

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


def _below(rng: random.Random, n: int) -> int:
    """Draw an int in ``0..n-1`` with one ``random()`` call."""
    return int(rng.random() * n)


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


def render_page(model: PageModel, text_key: str, site: str = "") -> bytes:
    """Render one HTML page.

    Args:
        model: The page's structure (links, base, canonical, meta robots, template, variant).
        text_key: Seed string of the text stream; exact duplicates share it with their original,
            so they render byte for byte the same.
        site: The host name the page was written for (shown by the news template).

    Returns:
        The UTF-8 HTML body, a few KB.
    """
    if model.template == "news":
        return render_news_page(model, text_key, site)
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
    if model.variant:
        # A near copy (near-copy hosts): an ad slot and a reader counter under the heading and a
        # timestamp in the footer, drawn from the variant's own stream so the text stream, and
        # so everything else on the page, is the original's.
        vrng = random.Random(model.variant)
        body.append(_ad_slot(vrng))
        if vrng.random() < 0.5:
            body.append(f'<p class="counter">{_between(vrng, 10, 99999):,} readers</p>')
    body.extend(f"<p>{_sentence_case(p)}</p>" for p in paragraphs)
    if model.variant:
        body.append(f"<footer>Generated by simweb at {_stamp(vrng)}.</footer>")
    else:
        body.append("<footer>Generated by simweb.</footer>")
    body.extend(["</body>", "</html>", ""])
    return "\n".join(head + body).encode("utf-8")


def _ad_slot(rng: random.Random) -> str:
    return f'<div class="ad-slot">Advertisement: {" ".join(words(rng, _between(rng, 3, 6)))}</div>'


def _stamp(rng: random.Random) -> str:
    return (
        f"{_between(rng, 0, 23):02d}:{_between(rng, 0, 59):02d}:{_between(rng, 0, 59):02d} "
        f"on 2024-{_between(rng, 1, 12):02d}-{_between(rng, 1, 28):02d}"
    )


MONTHS: tuple[str, ...] = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
SECTION_NAMES: tuple[str, ...] = (
    "World",
    "Business",
    "Technology",
    "Science",
    "Culture",
    "Sport",
    "Travel",
    "Opinion",
)
# The news template's fixed texts: one CMS theme shared by every template host, so its pages
# look alike (same chrome, same boilerplate) while their articles differ.
_MOST_READ: tuple[str, ...] = tuple(
    " ".join(w.capitalize() for w in words(random.Random(f"simweb-most-read|{i}"), 6)) for i in range(8)
)
_LEGAL = (
    "All rights reserved. No part of this site may be reproduced, distributed or transmitted in "
    "any form without prior written permission. Use of this site constitutes acceptance of our "
    "user agreement and privacy policy and cookie statement, and your privacy rights."
)


def _site_title(site: str) -> str:
    try:
        label = registered_domain(site).split(".")[0]
    except ValueError:  # not a simweb name (a test's own host)
        label = site.split(".")[0]
    return f"{label.capitalize()} Daily"


def render_news_page(model: PageModel, text_key: str, site: str) -> bytes:
    """Render a page of the news template (template hosts): heavy chrome, one article.

    Every page of every template host shares the template: a header with the site's name and
    a section menu, a "most read" sidebar, a long legal footer, scripts, and, inside the
    article, a dateline, a reader counter, an ad slot, a newsletter box and a disclaimer. Only
    the article (title and paragraphs, from ``text_key``) tells two pages apart, so they are
    look-alikes, not copies. The dateline's time, the counter and the ad come from
    ``model.variant``: a near-copy host shows the same article with other values there.

    Args:
        model: The page's structure; ``model.variant`` seeds the changing bits.
        text_key: Seed string of the article text.
        site: The host name shown in the chrome (a mirror shows its original's name).

    Returns:
        The UTF-8 HTML body.
    """
    rng = random.Random(text_key)
    title = " ".join(w.capitalize() for w in words(rng, _between(rng, 3, 6)))
    paragraphs = render_paragraphs(rng, _between(rng, 3, 6), 35, 80)
    if model.near:
        paragraphs[0][min(3, len(paragraphs[0]) - 1)] = "altered"
    for link in model.links:
        para = paragraphs[int(rng.random() * len(paragraphs))]
        text = " ".join(words(rng, _between(rng, 1, 3)))
        anchor = _anchor(link.href, text, link.nofollow, link.style)
        para.insert(_between(rng, 0, len(para)), anchor)
    # The article's month and section belong to the article; the time of day, the day, the
    # counter and the ad belong to the serving (the variant).
    fixed = random.Random(text_key + "|news")
    month = MONTHS[_below(fixed, len(MONTHS))]
    section = SECTION_NAMES[_below(fixed, len(SECTION_NAMES))]
    vrng = random.Random(model.variant or text_key)
    name = _site_title(site)
    head = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{title} | {name}</title>",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
    ]
    if model.base_href is not None:
        head.append(f'<base href="{model.base_href}">')
    if model.canonical is not None:
        head.append(f'<link rel="canonical" href="{model.canonical}">')
    if model.meta_robots is not None:
        head.append(f'<meta name="robots" content="{model.meta_robots}">')
    head.append("<style>body{font-family:serif}.ad-slot{min-height:90px}</style>")
    menu = "".join(f"<li>{s}</li>" for s in SECTION_NAMES)
    most_read = "".join(f"<li>{h}</li>" for h in _MOST_READ)
    body = [
        "</head>",
        "<body>",
        f'<header class="site-header"><div class="logo">{name}</div>'
        f'<nav class="main-nav"><ul>{menu}</ul></nav></header>',
        '<div class="layout">',
        "<main>",
        "<article>",
        f'<p class="kicker">{section}</p>',
        f"<h1>{title}</h1>",
        f'<p class="dateline">Updated {_between(vrng, 0, 23):02d}:{_between(vrng, 0, 59):02d} '
        f"on {_between(vrng, 1, 28)} {month} 2024 by the {name} newsroom</p>",
        f'<p class="counter">{_between(vrng, 10, 99999):,} readers</p>',
    ]
    body.extend(f"<p>{_sentence_case(p)}</p>" for p in paragraphs[:1])
    body.append(_ad_slot(vrng))
    body.extend(f"<p>{_sentence_case(p)}</p>" for p in paragraphs[1:])
    body.extend(
        [
            f'<div class="newsletter"><p>Get the best of {name} in your inbox every morning. '
            "Sign up for our free daily newsletter and never miss a story that matters.</p></div>",
            '<p class="disclaimer">Opinions expressed by contributors are their own. We correct '
            "errors promptly; write to the standards editor if you spot one.</p>",
            "</article>",
            "</main>",
            f'<aside class="sidebar"><h2>Most read</h2><ol>{most_read}</ol></aside>',
            "</div>",
            f'<footer class="site-footer"><p>&copy; 2024 {name} Media Group. {_LEGAL}</p></footer>',
            '<script>window.dataLayer=window.dataLayer||[];dataLayer.push({"page":"article"});</script>',
            "</body>",
            "</html>",
            "",
        ]
    )
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
