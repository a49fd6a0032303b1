"""simweb: a deterministic synthetic web on loopback, and the politeness audit that reads its log.

One aiohttp process serves thousands of virtual hosts on one port (dispatched by the ``Host``
header), with robots.txt variants, duplicates, traps, redirects, errors, slow hosts and a changing
page; it logs every request as a JSON line and can write the ground truth. ``audit`` checks a
crawl's politeness from that log.

Modules: ``names`` (host names), ``robots`` (robots.txt specs), ``site`` (the model),
``content`` (page bodies), ``truth`` (ground truth), ``server`` (HTTP server and CLI),
``testing`` (``running_simweb`` for tests) and ``audit``; for the opt-in change model
(``change_scale > 0``), ``changes`` (change classes and times), ``feeds`` (sitemap and feed
rendering) and ``freshness`` (freshness measured from the request log).
"""

from __future__ import annotations

from beamcrawl.simweb.audit import AuditReport, ReferenceRobotsRules, audit, host_policy
from beamcrawl.simweb.names import host_names, registered_domain
from beamcrawl.simweb.site import SimWeb
from beamcrawl.simweb.truth import build_truth, load_truth

__all__ = [
    "AuditReport",
    "ReferenceRobotsRules",
    "SimWeb",
    "audit",
    "build_truth",
    "host_names",
    "host_policy",
    "load_truth",
    "registered_domain",
]
