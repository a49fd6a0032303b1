"""With the change model off (the default), simweb serves and describes exactly what it did before
the change model existed: the fingerprints below were recorded from the code before it was added.

The fingerprint covers the whole truth (every page of every host) and every response for every
target the truth names plus robots.txt, its redirect target, the legacy sitemap, the news page
(served twice: it counts its servings) and the paths the change model adds (which must stay 404
when it is off). The 60-host web has mirror, near-copy and template hosts (from host 40 on).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from beamcrawl.simweb.site import SimWeb
from beamcrawl.simweb.truth import web_truth

# Recorded before the change model was written (see the module docstring).
EXPECTED = {
    (20, 1, 30): "5ebbe794b99da3d54c99fe951b65202d078012dcb3e167f0f94d0c775d90455c",
    (60, 3, 40): "f6b0340dea7caf711aef2ca46d654ac45ea4358ee01101ea9cb496ca3a9b3b0c",
}
EXTRA_TARGETS = {
    "/robots.txt",
    "/robots-real.txt",
    "/sitemap.xml",
    "/news.html",
    "/feed.rss",
    "/feed.atom",
    "/sitemap_index.xml",
    "/sitemaps/pages-1.xml.gz",
    "/sitemaps/pages-2.xml",
    "/s/0.html",
    "/s/1.html",
    "/nope",
}


def fingerprint(hosts: int, seed: int, pages: int, port: int = 8123, **kw: Any) -> str:
    web = SimWeb(hosts, seed=seed, pages_per_host=pages, port=port, **kw)
    truth = web_truth(web, max_pages=None)
    h = hashlib.sha256()
    h.update(json.dumps(truth, sort_keys=True).encode())
    for name, rec in truth.items():
        for t in sorted(set(rec["pages"]) | EXTRA_TARGETS):
            r = web.respond(name, t)
            if t == "/news.html":
                r = web.respond(name, t)
            h.update(
                repr(
                    (
                        name,
                        t,
                        r.status,
                        r.body,
                        r.content_type,
                        sorted((r.headers or {}).items()),
                        r.etag,
                        r.last_modified,
                        r.delay,
                    )
                ).encode()
            )
    return h.hexdigest()


@pytest.mark.parametrize("shape", sorted(EXPECTED))
def test_default_web_is_unchanged(shape: tuple[int, int, int]) -> None:
    assert fingerprint(*shape) == EXPECTED[shape]


@pytest.mark.parametrize("shape", sorted(EXPECTED))
def test_change_scale_zero_is_unchanged(shape: tuple[int, int, int]) -> None:
    assert fingerprint(*shape, change_scale=0.0) == EXPECTED[shape]
