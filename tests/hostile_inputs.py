"""Hostile hosts and URLs, as the web writes them: one grammar for every key and URL test.

The grammar is driven by a :class:`random.Random`, so a hypothesis test draws it with
``st.randoms(use_true_random=False)`` (reproducible, and shrunk by hypothesis) and can ask for
thousands of URLs per example without overrunning hypothesis's per-example data budget.

Shapes covered: IPv6 literals (compressed, exploded, upper-case, IPv4-embedded, with and
without port, with a zone id, unbracketed, unclosed), IPv4 in dotted, dword, octal, hex and
short forms (and out of range), IDN labels (several scripts, emoji, mapped and disallowed code
points, ``xn--`` labels valid and invalid), empty and 63/64-character labels, trailing and
ideographic dots, ports 0 / 65535 / 99999 / empty / signed, userinfo, NUL, C0 controls,
backslashes, dot segments, and lone surrogates (the form undecodable bytes take once decoded
with ``surrogateescape``).
"""

from __future__ import annotations

import ipaddress
import random

from hypothesis import strategies as st

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
_UNICODE = "éüßςЖжΣσ例えテスト中文한국אבعربي💩❤\u200d\u00ad\u3002\uff0e\u2488\u3253ＡＢＣ\u0301"
_ODD = "\x00\x01\t\n\r \\/%@:#?[]<>\"'`{}|^~!$&()*+,;=\x7f\udc80\udcff\ud800"
_XN = [
    "xn--", "xn--pokxncvks", "xn--bcher-kva", "xn--ls8h", "xn--a", "xn--abc-", "xn--zz-", "xn---",
    "xn--zckzah", "XN--BCHER-KVA", "xn--i-7iq", "xn--99999999999", "xn--ab--", "xn--0",
]  # fmt: skip
_TLDS = ["com", "org", "co.uk", "github.io", "test", "internal", "example", "xn--zckzah", "", "1", "0x7f", "co"]
_PORTS = [
    "",
    "",
    "",
    ":",
    ":0",
    ":1",
    ":80",
    ":443",
    ":8080",
    ":65535",
    ":65536",
    ":99999",
    ":-1",
    ":08080",
    ":8o",
    ":８０",
]
_USERINFO = ["", "", "", "user@", "u:p@", "@", "a@b@", "us%40er@", "\x00@", ":@"]
_SEPARATORS = ["://", "://", "://", "://", ":\\\\", ":/\\", ":/", ":", ":///", ":\\/\\/", "://\\"]
_SCHEMES = ["http", "https", "HTTP", "hTtPs", "ftp", "javascript", "mailto", "data", "file", "", "ht tp"]
_SEGMENTS = [
    "",
    ".",
    "..",
    "%2e",
    "%2E%2e",
    "a",
    "B",
    "\\",
    "..\\",
    "%zz",
    "%",
    "é",
    "\x00",
    "a b",
    "\udcff",
    ";jsessionid=1",
    "@",
]


def _label(rng: random.Random) -> str:
    kind = rng.randrange(10)
    if kind < 4:
        return "".join(rng.choice(_LETTERS) for _ in range(rng.randint(1, 12)))
    if kind == 4:
        return "".join(rng.choice(_UNICODE + _LETTERS) for _ in range(rng.randint(1, 8)))
    if kind == 5:
        return rng.choice(_XN)
    if kind == 6:
        return "a" * rng.choice([0, 62, 63, 64, 65, 200])
    if kind == 7:
        return rng.choice(["-a", "a-", "_", "-", "0", "09", "0x", "0xg", "255", "256"])
    if kind == 8:
        return "".join(rng.choice(_ODD + _LETTERS) for _ in range(rng.randint(1, 4)))
    return "www"


def hostile_ipv6(rng: random.Random) -> str:
    address = ipaddress.IPv6Address(rng.getrandbits(128) if rng.random() < 0.6 else rng.choice(
        [1, 0, (0xFFFF << 32) | rng.getrandbits(32), (0x20010DB8 << 96) | rng.getrandbits(16),
         (0xFE80 << 112) | rng.getrandbits(64), (0x20014860 << 96) | 0x8888]
    ))  # fmt: skip
    text = rng.choice([address.compressed, address.exploded, address.compressed.upper()])
    if rng.random() < 0.1:
        text = str(ipaddress.IPv4Address(rng.getrandbits(32))).join(["::ffff:", ""])
    if rng.random() < 0.1:
        text += rng.choice(["%25eth0", "%eth0", "%251", "%"])
    shape = rng.randrange(8)
    if shape == 0:
        return text  # unbracketed, as a resolver writes it
    if shape == 1:
        return f"[{text}"  # unclosed
    return f"[{text}]"


def hostile_ipv4(rng: random.Random) -> str:
    value = rng.choice([rng.getrandbits(32), 0x7F000001, 0xA9FEA9FE, 0, 0xFFFFFFFF, 1 << 32, 10 << 24 | 1])
    octets = [(value >> s) & 0xFF for s in (24, 16, 8, 0)]
    shape = rng.randrange(8)
    if shape == 0:
        text = str(value)  # dword
    elif shape == 1:
        text = hex(value)
    elif shape == 2:
        text = ".".join(f"0{o:o}" for o in octets)  # octal
    elif shape == 3:
        text = ".".join(hex(o) for o in octets)
    elif shape == 4:
        text = f"{octets[0]}.{(value & 0xFFFFFF)}"  # short form
    elif shape == 5:
        text = ".".join(str(o + rng.choice([0, 0, 256])) for o in octets)  # sometimes out of range
    else:
        text = ".".join(map(str, octets))
    return text + rng.choice(["", "", ".", ".."])


def hostile_host(rng: random.Random) -> str:
    """A host as a page may write it: valid or not, any shape."""
    kind = rng.randrange(10)
    if kind < 2:
        return hostile_ipv6(rng)
    if kind < 4:
        return hostile_ipv4(rng)
    if kind == 4:
        return "".join(rng.choice(_ODD + _UNICODE + _LETTERS) for _ in range(rng.randint(0, 10)))
    labels = [_label(rng) for _ in range(rng.randint(1, 4))]
    tld = rng.choice(_TLDS)
    host = ".".join(labels + ([tld] if tld else []))
    return host + rng.choice(["", "", "", ".", "。", ".."])


def hostile_slot(rng: random.Random) -> str:
    """A host with a port (a slot key as the web could make one)."""
    return hostile_host(rng) + rng.choice(_PORTS)


def hostile_url(rng: random.Random) -> str:
    """An absolute URL or a reference, as found in a page's links."""
    kind = rng.randrange(10)
    path = "/".join(rng.choice(_SEGMENTS) for _ in range(rng.randint(0, 5)))
    query = rng.choice(["", "", "?q=1", "?utm_source=x&a=\\b", "?", "?%zz", "?\x00"])
    fragment = rng.choice(["", "", "#top", "#", "#\\x"])
    if kind == 0:  # a relative reference
        return rng.choice(["", "/", "//", "\\\\", "\\", "../", "./", "?x", "#y", "..\\..\\"]) + path + query + fragment
    if kind == 1:
        return rng.choice(
            ["javascript:alert(1)", "data:text/html,x", "mailto:a@b.c", "file:///etc/passwd", "tel:1", "about:blank"]
        )
    scheme = rng.choice(_SCHEMES[:4]) if kind < 8 else rng.choice(_SCHEMES)
    sep = rng.choice(_SEPARATORS)
    return f"{scheme}{sep}{rng.choice(_USERINFO)}{hostile_slot(rng)}/{path}{query}{fragment}"


def hostile_urls(rng: random.Random, n: int) -> list[str]:
    return [hostile_url(rng) for _ in range(n)]


#: Hypothesis strategies over the grammar (reproducible randoms that hypothesis can shrink).
randoms = st.randoms(use_true_random=False)
#: For thousands of URLs per example (a whole round's pages): a seeded Random, so hypothesis
#: records one number per example rather than every choice.
seeded = st.integers(min_value=0, max_value=2**32 - 1).map(random.Random)
hosts = randoms.map(hostile_host)
slots = randoms.map(hostile_slot)
urls = randoms.map(hostile_url)

#: Any text at all, lone surrogates (undecodable bytes) and NUL included.
any_text = st.one_of(
    st.text(max_size=40),
    st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape")),
)

#: Valid IPv6 addresses from hypothesis itself, bracketed, and IPv4 addresses in every form.
ipv6_hosts = st.ip_addresses(v=6).map(lambda a: f"[{a}]")
ipv4_numbers = st.integers(min_value=0, max_value=2**32 - 1)
