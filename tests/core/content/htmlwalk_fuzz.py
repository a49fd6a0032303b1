"""Generated inputs for the compiled walk of the pre-scan (``_htmltags.walk``) against the walk in
Python, for a build with AddressSanitizer and UBSan (not a test: pytest does not collect it).

    CFLAGS="-fsanitize=address,undefined -g -O1" LDFLAGS=-fsanitize=address,undefined \
        python setup.py build_ext --build-lib /tmp/asan/lib --build-temp /tmp/asan/tmp
    # a copy of beamcrawl/ with that _htmltags*.so in it, at /tmp/asan/beamcrawl
    cd /tmp/asan && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1 \
        LD_PRELOAD=$(gcc -print-file-name=libasan.so) PYTHONPATH=/tmp/asan \
        python /path/to/tests/core/content/htmlwalk_fuzz.py 100000 1

Arguments: how many random tag soups, and the seed. Then the bombs under four sets of limits,
a 100,000-tag ``<a b>`` page, and calls with each argument replaced by junk (which must raise,
never crash). Prints the mismatches, if any, and a summary line.
"""

import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_htmlbounds import _BOMBS  # noqa: E402  (the shapes the tests cut)

from beamcrawl.core.content import htmlbounds as h
from beamcrawl.core.content import _htmltags as t

assert h.WALK_COMPILED, "compiled walk not in use"
print("module", t.__file__)
T = h._walk_tables(t.WALK_NAMES, t.WALK_SETS)
NAMES = (
    "a b i font nobr em code p div li ul ol dd dt table tbody thead tfoot tr td th caption colgroup col span form button select "
    "option optgroup svg math path g mi mo mtext annotation-xml foreignObject desc title br img hr input h1 h2 h3 object marquee applet template body html head pre "
    "address section xmp plaintext listing s u big small strike strong tt frameset iframe textarea label my-el"
).split()
ODD = ["b\u0130", "B\u0130", "lin\u212a", "\u212a", "k\u212a", "a\u00e9", "A\u00c9", "SPAN", "Table", "TD", "sVg"]
ATTRS = [
    "",
    "",
    "",
    " id=1",
    " id=2",
    " class=x",
    " color=red",
    " FACE=x",
    " s\u0130ze=2",
    " /",
    ' title="a>b"',
    " a b c d e",
    " x=",
    ' x="unc',
]
TEXT = ["x", " ", "\n", "<", "</", "<!-- <b> -->", "a < b", "\u00e9", ">"]
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)


def token():
    r = rng.random()
    if r < 0.5:
        n = rng.choice(NAMES if rng.random() < 0.9 else ODD)
        if rng.random() < 0.2:
            n = n.upper()
        return f"<{n}{rng.choice(ATTRS)}{'/' if rng.random() < 0.1 else ''}>"
    if r < 0.85:
        n = rng.choice(NAMES if rng.random() < 0.9 else ODD + ["k", "link"])
        return f"</{n}{rng.choice(['', '', ' x=1', ' a b c d e'])}>"
    return rng.choice(TEXT)


def soup():
    parts = []
    for _ in range(rng.randint(0, 60)):
        if rng.random() < 0.1:
            piece = "".join(token() for _ in range(rng.randint(1, 6)))
            parts.append(piece * rng.randint(1, 80))
        else:
            parts.append(token())
    return "".join(parts)


LIMITS = [
    (200_000, 512, 256, 400_000),
    (20, 4, 1, 25),
    (60, 9, 3, 90),
    (150, 30, 256, 400_000),
    (0, 0, 0, 0),
    (1, 1, 1, 1),
]


def both(text, limits):
    h.MAX_ELEMENTS, h.MAX_DEPTH, h.MAX_ATTRIBUTES, h.MAX_TAGS = limits
    a = h._walk(text)
    b = h._py_walk(text)
    if a != b:
        print("MISMATCH", limits, repr(text[:300]), a, b, flush=True)
        return 1
    return 0


n = int(sys.argv[1])
bad = 0
t0 = time.time()
for _ in range(n):
    bad += both(soup(), rng.choice(LIMITS))
# the bombs
B = _BOMBS
for make in B.values():
    for f, b in (("font", "p"), ("a", "div"), ("nobr", "li"), ("b", "h1")):
        for limits in LIMITS[:4]:
            bad += both(make(3000, f, b), limits)
bad += both("<a b>" * 100_000, LIMITS[0])
# bad arguments: must raise, never crash
args = [[("", "b", ">", "x")], False, *T, 10, 10, 10, 10, h._attribute_count]
raised = 0
junk = [None, 1, "x", b"x", [], (), {}, [None], [("",)], [(1, 2, 3, 4)], -1, 2**70, [("", "b", ">", "x")] * 3, object()]
for i in range(len(args)):
    for j in junk:
        a = list(args)
        a[i] = j
        try:
            t.walk(*a)
        except (TypeError, ValueError, OverflowError):
            raised += 1
for k in range(len(args) + 2):
    try:
        t.walk(*args[:k])
    except TypeError:
        raised += 1
print(f"inputs={n} mismatches={bad} bad-argument calls raised={raised} seconds={time.time() - t0:.0f}", flush=True)
sys.exit(1 if bad else 0)
