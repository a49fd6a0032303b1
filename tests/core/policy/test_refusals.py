"""core/policy/refusals.py: which answers refuse the crawler's identity, and how long a host is
held for it. Robots.txt pairs (a group for our token beside a ``*`` group) are generated, and
the decision is checked against each group read on its own."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamcrawl.core.policy import refusals
from beamcrawl.core.policy.refusals import Answer, Identity
from beamcrawl.core.policy.robots import RobotsRules

TOKEN = "beamcrawl"
ME = Identity(TOKEN)
NOW = 1_800_000_000.0
DAY = 86400.0

_paths = st.sampled_from(["/", "/a", "/a/", "/a/b", "/private/", "/*", "/$", "/*.html", ""])
_rule = st.tuples(st.sampled_from(["Allow", "Disallow", "allow", "DISALLOW"]), _paths)
_group = st.lists(_rule, max_size=4)
_noise = st.sampled_from(["", "# a comment", "Noindex: /x", "Crawl-delay: 2", "Request-rate: 1/5"])


def _lines(rules: list[tuple[str, str]], noise: str) -> list[str]:
    # Each group has a rule (one that touches no path here): User-agent lines with nothing
    # between them are one group (RFC 9309 §2.2.1), blank lines or not.
    out = ["Disallow: /never-linked/", *(f"{field}: {path}" for field, path in rules)]
    if noise:
        out.insert(len(out) // 2, noise)
    return out


def _file(agent_line: str | None, ours: list, star: list, noise: str, star_first: bool) -> str:
    groups = []
    if agent_line is not None:
        groups.append([agent_line, *_lines(ours, noise)])
    groups.append(["User-agent: *", *_lines(star, noise)])
    if star_first:
        groups.reverse()
    return "\n\n".join("\n".join(g) for g in groups) + "\n"


def _alone(rules: list, noise: str) -> RobotsRules:
    """One group read on its own, as the only group of a file: the oracle."""
    return RobotsRules.parse("\n".join(["User-agent: *", *_lines(rules, noise)]) + "\n", TOKEN)


@settings(max_examples=150, deadline=None)
@given(
    agent=st.sampled_from(["User-agent: beamcrawl", "user-agent: BeamCrawl/2.1", "User-Agent:beamcrawl # us"]),
    ours=_group,
    star=_group,
    noise=_noise,
    star_first=st.booleans(),
)
def test_a_refusal_is_our_group_refusing_the_root_where_the_star_group_allows_it(agent, ours, star, noise, star_first):
    rules = RobotsRules.parse(_file(agent, ours, star, noise, star_first), TOKEN)
    expected = not _alone(ours, noise).allowed("/") and _alone(star, noise).allowed("/")
    evidence = refusals.token_refusal(rules)
    assert (evidence is not None) == expected
    if evidence is not None:
        assert any(agent.split("#")[0].strip() in line for line in evidence["lines"])
        assert not rules.allowed("/")  # never a refusal the rules in force do not say


@settings(max_examples=60, deadline=None)
@given(group=_group, noise=_noise, other=st.sampled_from([None, "User-agent: otherbot", "User-agent: beamcrawler"]))
def test_a_file_that_names_no_group_for_us_refuses_no_one_in_particular(group, noise, other):
    # The * group alone, or beside a group for another agent (a longer name is not ours).
    assert (
        refusals.token_refusal(RobotsRules.parse(_file(other, [("Disallow", "/")], group, noise, False), TOKEN)) is None
    )
    # Our group identical to the * group: nothing singles us out.
    same = RobotsRules.parse(_file("User-agent: beamcrawl", group, group, noise, False), TOKEN)
    assert refusals.token_refusal(same) is None


def test_unavailable_unreachable_and_missing_robots_refuse_no_one():
    for rules in (RobotsRules("allow_all", TOKEN, status=404), RobotsRules("disallow_all", TOKEN, status=503), None):
        assert refusals.token_refusal(rules) is None


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([200, 204, 301, 304, 401, 403, 404, 429, 500]), st.sampled_from(["", "kid1"])),
        max_size=6,
    )
)
def test_a_status_refusal_is_every_answer_a_401_or_403_to_a_signed_request(pairs):
    answers = [Answer(status, keyid, f"http://h/{i}") for i, (status, keyid) in enumerate(pairs)]
    expected = bool(pairs) and all(s in (401, 403) and k for s, k in pairs)
    evidence = refusals.status_refusal(answers)
    assert (evidence is not None) == expected
    if evidence is not None:
        assert evidence == {"status": pairs[0][0], "url": "http://h/0", "answers": len(pairs)}


def test_the_status_back_off_is_a_day_doubling_to_thirty_days():
    waits = [refusals.status_backoff(n) for n in range(1, 10)]
    assert waits[:5] == [DAY, 2 * DAY, 4 * DAY, 8 * DAY, 16 * DAY]
    assert waits[5:] == [30 * DAY] * 4
    assert refusals.status_backoff(10**9) == 30 * DAY


def test_keyid_is_read_from_the_signature_input():
    signed = [("User-Agent", "x"), ("Signature-Input", 'sig1=("@authority");created=1;keyid="abc_-1";alg="ed25519"')]
    assert refusals.keyid_of(signed) == "abc_-1"
    assert refusals.keyid_of([("User-Agent", "x")]) == ""


def test_a_status_refusal_holds_for_its_back_off_then_a_recheck_renews_or_clears_it():
    refused = [Answer(403, "kid1", "http://h/")]
    stored, noted, cleared = refusals.update_after_round([], ME, refused, None, NOW)
    assert (noted, cleared) == (["status"], [])
    (record,) = stored
    assert record["identity"] == {"token": TOKEN, "key": "kid1", "purposes": []}
    assert record["evidence"]["status"] == 403 and record["since"] == record["at"] == NOW
    assert refusals.in_force(stored, ME, NOW + DAY - 1, robots_due=False) is not None
    assert refusals.in_force(stored, ME, NOW + DAY, robots_due=False) is None
    assert [r.kind for r in refusals.on_recheck(stored, ME, NOW + DAY)] == ["status"]
    # Refused again at the recheck: held twice as long, first seen kept.
    again, noted, _ = refusals.update_after_round(stored, ME, refused, None, NOW + DAY)
    (renewed,) = refusals.load(again)
    assert noted == ["status"] and renewed.count == 2 and renewed.since == NOW
    assert renewed.until == NOW + DAY + 2 * DAY
    # Any answer that is not a signed 401/403 clears it; no answer at all leaves it.
    assert refusals.update_after_round(again, ME, [], None, NOW + 4 * DAY)[0] == again
    clear, _, cleared = refusals.update_after_round(again, ME, [Answer(200, "", "u")], None, NOW + 4 * DAY)
    assert clear == [] and cleared == ["status"]


def test_a_token_refusal_lasts_while_the_robots_txt_says_so():
    refusing = RobotsRules.parse("User-agent: beamcrawl\nDisallow: /\n\nUser-agent: *\nDisallow:\n", TOKEN)
    stored, noted, _ = refusals.update_after_round([], ME, [], refusing, NOW)
    assert noted == ["token"] and stored[0]["until"] == 0.0 and stored[0]["evidence"]["status"] == 200
    assert refusals.in_force(stored, ME, NOW + 365 * DAY, robots_due=False) is not None
    assert refusals.in_force(stored, ME, NOW + DAY, robots_due=True) is None  # its recheck
    # An unreachable robots.txt says nothing new; a file that no longer refuses us clears it.
    unreachable = RobotsRules("disallow_all", TOKEN, status=503)
    assert refusals.update_after_round(stored, ME, [], unreachable, NOW + DAY)[0] == stored
    welcome = RobotsRules.parse("User-agent: *\nDisallow: /private/\n", TOKEN)
    assert refusals.update_after_round(stored, ME, [], welcome, NOW + DAY)[0:3:2] == ([], ["token"])


def test_a_site_refusing_a_declared_purpose_is_held_until_its_robots_txt_says_otherwise():
    trainer = Identity(TOKEN, purposes=("ai-train",))
    refusing = RobotsRules.parse("User-agent: *\nContent-Signal: search=yes, ai-train=no\nAllow: /\n", TOKEN)
    stored, noted, _ = refusals.update_after_round([], trainer, [], refusing, NOW)
    assert noted == ["purpose"] and "ai-train" in stored[0]["evidence"]["robots"], stored
    assert refusals.in_force(stored, trainer, NOW + DAY, robots_due=False) is not None
    # The same file refuses nothing to a crawl that declares no purpose, or another one.
    for other in (ME, Identity(TOKEN, purposes=("search",))):
        assert refusals.update_after_round([], other, [], refusing, NOW)[0] == []
    # A path-scoped refusal is not the whole site; a file that no longer refuses clears it.
    partial = RobotsRules.parse("User-agent: *\nContent-Usage: /private/ train-ai=n\n", TOKEN)
    assert refusals.update_after_round(stored, trainer, [], partial, NOW + DAY)[0:3:2] == ([], ["purpose"])
    unreachable = RobotsRules("disallow_all", TOKEN, status=503)
    assert refusals.update_after_round(stored, trainer, [], unreachable, NOW + DAY)[0] == stored


def test_a_refusal_holds_only_the_identity_it_names():
    stored = refusals.note([], "token", ME, {}, NOW)
    assert refusals.in_force(stored, Identity("otherbot"), NOW, robots_due=False) is None
    # A rotated key is the same crawler: still held.
    assert refusals.in_force(stored, Identity(TOKEN, key="new-key"), NOW, robots_due=False) is not None
    purpose = refusals.note([], "purpose", Identity(TOKEN, purposes=("ai-train",)), {"signal": "ai-train=no"}, NOW)
    assert refusals.in_force(purpose, Identity(TOKEN, purposes=("search",)), NOW, robots_due=False) is None
    assert refusals.in_force(purpose, Identity(TOKEN, purposes=("search", "ai-train")), NOW, False) is not None
    with pytest.raises(ValueError, match="unknown refusal kind"):
        refusals.note([], "nope", ME, {}, NOW)


def test_clear_drops_the_kinds_asked_for():
    stored = refusals.note(refusals.note([], "token", ME, {}, NOW), "status", ME, {}, NOW)
    assert [r["kind"] for r in refusals.clear(stored, ["status"])] == ["token"]
    assert refusals.clear(stored) == []


@settings(max_examples=80, deadline=None)
@given(st.lists(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                             lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=4)),
                max_size=4))  # fmt: skip
def test_a_damaged_stored_refusal_never_raises_and_never_holds(stored):
    json.dumps(stored)  # what a row could hold
    assert refusals.in_force(stored, ME, NOW, robots_due=False) is None or any(
        isinstance(d, dict) and d.get("kind") in refusals.KINDS for d in stored
    )
    refusals.on_recheck(stored, ME, NOW)
    refusals.update_after_round(stored, ME, [Answer(200, "", "u")], None, NOW)
