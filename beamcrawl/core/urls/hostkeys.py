"""Keys derived from hosts: the host name, its registered domain and its fetch shard.

Hosts come from the web, so every key here is derived from untrusted text. Each function is
total: for *any* string (a slot key ``host[:port]`` as :func:`beamcrawl.core.urls.urlnorm.host_of`
returns, a bare host name, an IPv6 address without brackets, or garbage with NUL bytes and
lone surrogates from undecodable bytes) it returns a non-empty, ASCII key, so no store row key,
Parquet column or shard built from it can be empty or fail to encode. A string that is not a
host at all gets a key of its own that no real host has (``~`` and the escaped text), rather
than an exception in the middle of a round; URLs with such hosts are refused earlier, by
:func:`beamcrawl.core.urls.urlnorm.normalize`, with a reason.

The keys agree with each other, which is what lets a policy or a budget set on one name cover
the slots that are looked up under another:

* :func:`host_key` is a slot's host without its port, written as the crawl writes hosts:
  lower-case, IDNA, IPv4 dotted-decimal, IPv6 compressed *in brackets* (``[::1]``). An
  operator policy set on ``[::1]`` is found for the slot ``[::1]:8080`` under this key.
* :func:`hostname_of` is the same name as a resolver wants it: IPv6 without brackets.
* :func:`domain_of` is the registered domain (eTLD+1) of the host, always the host itself or
  a suffix of it. An IP address is its own domain: ``[2001:db8::1]`` and
  ``[2001:4860::8888]`` are two domains, never one ``2001``.
* :func:`shard_of` is a stable shard number in ``range(shards)``.

Pure: no Beam, no store. tldextract is only imported when a domain is first needed.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
import threading
from functools import lru_cache
from typing import Any, Iterable
from urllib.parse import quote

import mmh3

from beamcrawl.core.urls.urlnorm import InvalidURL, normalize_host

__all__ = ["clear_caches", "domain_of", "host_key", "hostname_of", "is_ip_key", "shard_of", "split_slot"]

# A key for text that is no host: "~" cannot start a host name, so it never meets a real one.
_INVALID_PREFIX = "~"
_MAX_FALLBACK = 200
_FALLBACK_KEY = re.compile(r"~[A-Za-z0-9_.\-~%]*")
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")


def _fallback_key(text: str) -> str:
    """The key of a string that is not a host: ``~`` and its escaped UTF-8, bounded."""
    try:  # undecodable bytes back as they came; other lone surrogates as their code points
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
    escaped = quote(raw, safe="")
    if len(escaped) > _MAX_FALLBACK:
        digest = mmh3.hash64(raw, seed=0, signed=False)[0]
        escaped = f"{escaped[:_MAX_FALLBACK]}~{digest:016x}"
    return _INVALID_PREFIX + escaped


def split_slot(slot: str) -> tuple[str, str]:
    """``host[:port]`` to ``(host, port)``, as written (no validation).

    ``[v6]:port`` keeps its brackets; a bare IPv6 address (more than one ``:``, no brackets)
    is all host.
    """
    if slot.startswith("["):
        close = slot.find("]")
        if close >= 0:
            rest = slot[close + 1 :]
            return slot[: close + 1], rest[1:] if rest.startswith(":") else ""
        return slot, ""
    if slot.count(":") > 1:
        return slot, ""
    host, _, port = slot.partition(":")
    return host, port


@lru_cache(maxsize=65536)  # asked for every due row and every link: the hosts repeat
def host_key(slot: str) -> str:
    """The canonical host name of a slot key (port dropped; IPv6 in brackets). Never empty.

    Args:
        slot: ``host[:port]``, a bare host name or IPv6 address, or any string.

    Returns:
        ``"example.com"`` for ``"Example.COM.:8080"``, ``"[::1]"`` for ``"[::1]:8080"`` and for
        ``"::1"``, ``"127.0.0.1"`` for ``"2130706433"``; ``"~..."`` for text that is no host.
    """
    if slot.startswith(_INVALID_PREFIX) and _FALLBACK_KEY.fullmatch(slot):
        return slot  # already such a key (so host_key is idempotent)
    # Read as policy_key reads an operator's host and a URL parser its authority: whitespace
    # around it cut, tabs and newlines inside removed (WHATWG).
    host, _ = split_slot(slot.strip().translate(_TAB_NEWLINE))
    if host and not host.startswith("[") and ":" in host:
        host = f"[{host}]"  # a bare IPv6 address, as resolvers and operators write it
    try:
        return normalize_host(host)
    except InvalidURL:
        return _fallback_key(slot)


@lru_cache(maxsize=65536)
def hostname_of(slot: str) -> str:
    """The host name of a slot key as a resolver takes it (IPv6 without brackets). Never empty."""
    key = host_key(slot)
    return key[1:-1] if key.startswith("[") else key


def blocklisted(host: str, patterns: Iterable[str]) -> bool:
    """Whether ``--blocklist`` names the host (slot key ``host[:port]`` or bare name; globs):
    the planner gives it no slots, and no robots.txt redirect hop goes to it."""
    names = {host.lower(), hostname_of(host), host_key(host)}
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns for name in names)


def is_ip_key(key: str) -> bool:
    """Whether a :func:`host_key` is an IP address (IPv6 in brackets or dotted IPv4)."""
    if key.startswith("["):
        return True
    try:
        ipaddress.IPv4Address(key)
    except ValueError:
        return False
    return True


_extractor: Any = None
_extractor_lock = threading.Lock()


def _get_extractor() -> Any:
    global _extractor
    if _extractor is None:
        with _extractor_lock:
            if _extractor is None:
                import tldextract  # ~0.5 s to import: only when a domain is first needed

                # The bundled Public Suffix List snapshot: never a network fetch, never a cache
                # file. Private suffixes (github.io, blogspot.com) are included so each site on
                # them gets its own domain budget.
                _extractor = tldextract.TLDExtract(
                    suffix_list_urls=(),
                    cache_dir=None,
                    fallback_to_snapshot=True,
                    include_psl_private_domains=True,
                )
    return _extractor


@lru_cache(maxsize=65536)  # asked per link of every page: the linked hosts repeat
def domain_of(slot: str) -> str:
    """The registered domain (eTLD+1) of a slot's host, for per-domain budgets. Never empty.

    Args:
        slot: ``host[:port]`` (as :func:`beamcrawl.core.urls.urlnorm.host_of` returns) or any string.

    Returns:
        ``news.example.co.uk`` → ``example.co.uk``. An IP address is its own domain
        (``[2001:db8::1]``, ``127.0.0.1``), and so is a key for text that is no host. A name
        under a suffix the Public Suffix List does not know (``.test``, ``.internal``) is
        treated as if its last label were a public suffix; a single label is returned as is.
        Always :func:`host_key` itself or a suffix of it that starts after a ``.``.
    """
    host = host_key(slot)
    if host.startswith(_INVALID_PREFIX) or is_ip_key(host) or "." not in host:
        return host
    result = _get_extractor()(host)
    # tldextract 5.3 renamed registered_domain; setup.py allows any 5.x.
    domain = getattr(result, "top_domain_under_public_suffix", None)
    if domain is None:
        domain = result.registered_domain
    if not domain:
        if result.suffix:  # the host is itself a public suffix (e.g. "co.uk")
            return host
        domain = ".".join(host.rsplit(".", 2)[-2:])
    domain = str(domain)
    # Whatever the suffix list says, a domain is the host or a suffix of it: budgets and the
    # new-host caps count a host under its domain, and must never count it under another's.
    if domain != host and not host.endswith("." + domain):
        return host
    return domain


def shard_of(key: str, shards: int) -> int:
    """The shard in ``range(shards)`` that owns ``key`` (stable across processes, unlike
    ``hash``); any string, lone surrogates included."""
    return mmh3.hash(key.encode("utf-8", "surrogatepass"), seed=0, signed=False) % shards


def clear_caches() -> None:
    """Empties this module's caches of host keys, names and domains: at the end of a long
    run of pages, as :func:`beamcrawl.core.urls.urlnorm.clear_caches` (which says why)."""
    for cached in (host_key, hostname_of, domain_of):
        cached.cache_clear()
