"""Refusals: a host that said no to the crawler's identity, remembered in its host record.

A refusal is what a host told *this crawler* (not every client) to stop: its record holds
the identity refused (product token, signing key thumbprint, purposes), the kind of
refusal, the evidence and when it was seen. Three kinds, each decided by a pure function
here and applied by the scheduler the same way (transforms/assign_slots.py holds the host:
its due URLs stay queued, nothing is deleted):

* ``status``: every page answer of a round was 401 or 403 to a *signed* request (Web Bot
  Auth, core/net/botauth.py). An unsigned 401/403 is not a refusal of us: it is a login wall
  or a page closed to everyone, and stays a per-URL answer. Rechecked after a back-off of
  24 h, doubling at each refusal seen again, up to 30 days (:func:`status_backoff`); the
  recheck is one URL (the best ranked), never a full window.
* ``token``: the host's robots.txt refuses our product token its root ``/`` while its ``*``
  group allows it (the file singles us out). Compared with the robots machinery of
  core/policy/robots.py: the same text read for our token and for a token no group names
  (:func:`token_refusal`). Rechecked when the robots.txt is fetched again on its usual
  schedule (at most 24 h old); the refusal clears when the file no longer refuses us.
* ``purpose``: the host's robots.txt refuses one of the crawl's declared purposes
  (``--purpose``) for the whole site, by its usage preferences
  (:func:`core.policy.usage_prefs.site_refuses`). Held and rechecked as ``token``: the next
  robots.txt fetch renews it or clears it.

A refusal holds a crawl whose identity it names (:func:`applies`): the same product token
(and, for ``purpose``, a purpose in common). The key thumbprint is recorded as evidence of
what was refused but not matched on: a rotated key must not bring a refused crawler back.
A refusal never makes the crawler fetch more: it only takes slots away. Records are plain
dicts (``HostRecord.refusals``), one per kind and token, so rows stay JSON.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple, Sequence

from beamcrawl.core.policy.robots import RobotsRules
from beamcrawl.core.policy import usage_prefs

if TYPE_CHECKING:
    from beamcrawl.core.runtime.config import CrawlConfig

__all__ = [
    "KINDS",
    "REFUSAL_STATUSES",
    "STATUS_BACKOFF_MAX",
    "STATUS_BACKOFF_MIN",
    "Answer",
    "Identity",
    "Refusal",
    "applies",
    "clear",
    "crawl_identity",
    "in_force",
    "keyid_of",
    "load",
    "note",
    "on_recheck",
    "status_backoff",
    "status_refusal",
    "token_refusal",
    "update_after_round",
]

KINDS = ("status", "token", "purpose")
#: Answers that refuse the requester (RFC 9110 §15.5.2, §15.5.4).
REFUSAL_STATUSES = frozenset({401, 403})
#: A status refusal holds the host this long the first time, doubling each time it is seen
#: again at the recheck, up to the maximum.
STATUS_BACKOFF_MIN = 24 * 3600.0
STATUS_BACKOFF_MAX = 30 * 24 * 3600.0
# Lines of a robots.txt quoted as evidence, at most.
MAX_EVIDENCE_LINES = 5

_KEYID = re.compile(r';\s*keyid="([^"\\]{1,200})"')


@dataclass(frozen=True)
class Identity:
    """Who the crawler says it is: its robots.txt product token, the thumbprint of the key it
    signs with ("" when unsigned) and the purposes it declares (none by default)."""

    token: str
    key: str = ""
    purposes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"token": self.token, "key": self.key, "purposes": list(self.purposes)}

    @classmethod
    def from_dict(cls, data: Any) -> Identity:
        data = data if isinstance(data, dict) else {}
        purposes = data.get("purposes") or ()
        return cls(
            token=str(data.get("token") or ""),
            key=str(data.get("key") or ""),
            purposes=tuple(str(p) for p in purposes) if isinstance(purposes, (list, tuple)) else (),
        )


@dataclass
class Refusal:
    """One refusal of one identity by one host.

    Attributes:
        kind: ``status``, ``token`` or ``purpose``.
        identity: The identity refused.
        evidence: What the host said (``status`` and ``url``; the robots.txt ``lines``).
        since: When it was first seen (epoch seconds).
        at: When it was last seen.
        until: Epoch seconds until which the host is held; 0 for a refusal that lasts as
            long as its robots.txt says so (rechecked at each robots.txt fetch).
        count: Times it was seen at a recheck in a row (drives the status back-off).
    """

    kind: str
    identity: Identity
    evidence: dict[str, Any] = field(default_factory=dict)
    since: float = 0.0
    at: float = 0.0
    until: float = 0.0
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["identity"] = self.identity.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Refusal | None:
        """The refusal a stored dict holds; None for one that does not read as one (a
        damaged row must not hold a host, nor fail the round)."""
        if not isinstance(data, dict) or data.get("kind") not in KINDS:
            return None
        try:
            return cls(
                kind=data["kind"],
                identity=Identity.from_dict(data.get("identity")),
                evidence=dict(data.get("evidence") or {}),
                since=float(data.get("since") or 0.0),
                at=float(data.get("at") or 0.0),
                until=float(data.get("until") or 0.0),
                count=max(1, int(data.get("count") or 1)),
            )
        except (TypeError, ValueError):
            return None


class Answer(NamedTuple):
    """A page answer of a round, as the refusal check sees it."""

    status: int
    keyid: str  # of the request's signature; "" when it was not signed
    url: str


def crawl_identity(cfg: CrawlConfig, key: str = "") -> Identity:
    """The identity a crawl presents: its product token and declared purposes (a crawl
    without ``purposes`` declares none)."""
    purposes = getattr(cfg, "purposes", None) or ()
    return Identity(token=cfg.robots_token.lower(), key=key, purposes=tuple(purposes))


def load(stored: Iterable[Any] | None) -> list[Refusal]:
    """The refusals of a host record's ``refusals`` field (unreadable entries skipped)."""
    out = []
    for data in stored or ():
        refusal = Refusal.from_dict(data)
        if refusal is not None:
            out.append(refusal)
    return out


def applies(refusal: Refusal, identity: Identity) -> bool:
    """Whether ``refusal`` holds a crawl of ``identity``: the same product token and, for a
    purpose refusal, a purpose in common. The key is not compared (see the module text)."""
    if refusal.identity.token.lower() != identity.token.lower():
        return False
    if refusal.kind == "purpose":
        return bool(set(refusal.identity.purposes) & set(identity.purposes))
    return True


def in_force(stored: Iterable[Any] | None, identity: Identity, now: float, robots_due: bool) -> Refusal | None:
    """The refusal that holds a host now for ``identity``, or None.

    A refusal with an ``until`` holds until then. One without (decided from robots.txt)
    holds until the robots.txt is due to be fetched again (``robots_due``): that fetch is
    its recheck, so the host is then planned for its robots.txt alone (see
    :func:`on_recheck`).
    """
    for refusal in load(stored):
        if not applies(refusal, identity):
            continue
        if refusal.until > 0 and now < refusal.until:
            return refusal
        if refusal.until <= 0 and not robots_due:
            return refusal
    return None


def on_recheck(stored: Iterable[Any] | None, identity: Identity, now: float) -> list[Refusal]:
    """The refusals of ``identity`` whose hold has lapsed but that are not cleared yet: the
    host is planned for their recheck only (one URL after a status back-off, its robots.txt
    for one decided from robots.txt)."""
    return [r for r in load(stored) if applies(r, identity) and (r.until <= 0 or now >= r.until)]


def status_backoff(count: int) -> float:
    """How long a status refusal holds its host: 24 h the first time, doubling each time it
    is seen again, at most 30 days."""
    return min(STATUS_BACKOFF_MAX, STATUS_BACKOFF_MIN * 2.0 ** max(0, min(count, 64) - 1))


def keyid_of(request_headers: Sequence[tuple[str, str]]) -> str:
    """The ``keyid`` of a request's Web Bot Auth signature ("" when it was not signed)."""
    for name, value in request_headers:
        if name.lower() == "signature-input":
            match = _KEYID.search(value)
            return match.group(1) if match else ""
    return ""


def status_refusal(answers: Sequence[Answer]) -> dict[str, Any] | None:
    """The evidence of a status refusal in a host's page answers of a round, or None.

    A refusal when there was at least one answer and every one was 401 or 403 to a signed
    request: a host that serves us anything else, or refuses only unsigned requests, has not
    refused our identity.
    """
    if not answers or any(a.status not in REFUSAL_STATUSES or not a.keyid for a in answers):
        return None
    first = answers[0]
    return {"status": first.status, "url": first.url, "answers": len(answers)}


def _unnamed_token(text: str, token: str) -> str:
    """A product token that no group of ``text`` can name, so that reading the file for it
    gives the ``*`` group's rules (or no rules)."""
    lower = text.lower()
    n = 0
    while True:
        candidate = f"x{n}q"
        if candidate not in lower and token not in candidate and "other" not in candidate:
            return candidate
        n += 1


def token_refusal(rules: RobotsRules | None) -> dict[str, Any] | None:
    """The evidence that a robots.txt singles our token out, or None.

    It does when, read for our token, it disallows the site root ``/`` and, read for the
    ``*`` group (a token no group names), it allows it. The same file read twice by the one
    robots.txt reader (core/policy/robots.py): no second parser. An unavailable (4xx) or
    unreachable (5xx) robots.txt refuses no one in particular.
    """
    if rules is None or rules.kind != "parsed":
        return None
    text = rules.text or ""
    if rules.token not in text.lower() or rules.allowed("/"):
        return None  # a file that never names us cannot single us out: no parse needed
    everyone = RobotsRules("parsed", _unnamed_token(text, rules.token), text, rules.status)
    if not everyone.allowed("/"):
        return None
    lines = []
    for number, line in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), start=1):
        name, colon, value = line.partition("#")[0].partition(":")
        agent = re.match(r"[A-Za-z0-9_\-]+", value.strip()) if colon else None
        if name.strip().lower() == "user-agent" and agent and agent.group().lower() == rules.token:
            lines.append(f"{number}: {line.strip()}"[:200])
            if len(lines) >= MAX_EVIDENCE_LINES:
                break
    return {"robots": f"the group for {rules.token} disallows / where the * group allows it", "lines": lines}


def note(
    stored: Iterable[Any] | None, kind: str, identity: Identity, evidence: dict[str, Any], now: float
) -> list[dict[str, Any]]:
    """A host record's refusals with this one recorded (the one call that records any kind).

    A refusal of the same kind and token seen again is renewed: its count goes up, and a
    status refusal's hold grows (:func:`status_backoff`). A ``token`` or ``purpose`` refusal
    has no ``until``: it holds until the robots.txt is due again, and is renewed or cleared
    (:func:`clear`) by what that fetch says. Returns the new list of dicts.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown refusal kind {kind!r} (one of {', '.join(KINDS)})")
    kept: list[dict[str, Any]] = []
    previous: Refusal | None = None
    for refusal in load(stored):
        if refusal.kind == kind and refusal.identity.token.lower() == identity.token.lower():
            previous = refusal
        else:
            kept.append(refusal.to_dict())
    count = previous.count + 1 if previous is not None else 1
    refusal = Refusal(
        kind=kind,
        identity=identity,
        evidence=evidence,
        since=previous.since if previous is not None else now,
        at=now,
        until=now + status_backoff(count) if kind == "status" else 0.0,
        count=count,
    )
    return [*kept, refusal.to_dict()]


def clear(stored: Iterable[Any] | None, kinds: Iterable[str] = KINDS, token: str | None = None) -> list[dict[str, Any]]:
    """A host record's refusals without those of ``kinds`` (of ``token``, or of any token)."""
    drop = set(kinds)
    return [
        r.to_dict()
        for r in load(stored)
        if not (r.kind in drop and (token is None or r.identity.token.lower() == token.lower()))
    ]


def update_after_round(
    stored: Iterable[Any] | None,
    identity: Identity,
    answers: Sequence[Answer],
    robots: RobotsRules | None,
    now: float,
) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """A host's refusals after its round: recorded, renewed or cleared by what it answered.

    Args:
        stored: The record's refusals before.
        identity: The crawl's identity.
        answers: The host's page answers this round (robots.txt not among them).
        robots: Its robots.txt as fetched this round (the latest answer), None when it was
            not fetched: a token refusal is only decided, or cleared, by a fetch.
        now: Epoch seconds.

    Returns:
        The new refusals, the kinds recorded (or renewed) and the kinds cleared.
    """
    refusals = [r.to_dict() for r in load(stored)]
    mine = {r.kind for r in load(stored) if r.identity.token.lower() == identity.token.lower()}
    noted: list[str] = []
    cleared: list[str] = []
    evidence = status_refusal(answers)
    if evidence is not None:
        keys = sorted({a.keyid for a in answers})
        refusals = note(refusals, "status", Identity(identity.token, keys[0], identity.purposes), evidence, now)
        noted.append("status")
    elif answers and "status" in mine:
        refusals = clear(refusals, ["status"], identity.token)  # the recheck was answered
        cleared.append("status")
    if robots is not None and robots.kind != "disallow_all":  # unreachable says nothing
        evidence = token_refusal(robots)
        if evidence is not None:
            refusals = note(refusals, "token", identity, {**evidence, "status": robots.status}, now)
            noted.append("token")
        elif "token" in mine:
            refusals = clear(refusals, ["token"], identity.token)
            cleared.append("token")
        why = usage_prefs.site_refuses(robots, identity.purposes) if identity.purposes else None
        if why is not None:
            refusals = note(refusals, "purpose", identity, {"robots": why, "status": robots.status}, now)
            noted.append("purpose")
        elif "purpose" in mine:
            refusals = clear(refusals, ["purpose"], identity.token)
            cleared.append("purpose")
    return refusals, noted, cleared
