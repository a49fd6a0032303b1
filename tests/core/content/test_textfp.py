"""Text fingerprints: visible text, features, simhash (against the simhash package) and the
permuted tables that find every fingerprint within 3 bits."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from beamcrawl.core.content.textfp import (
    LAYOUT,
    LAYOUTS,
    MAX_DISTANCE,
    TEN_TABLES,
    TableLayout,
    features,
    hamming,
    html_simhash,
    layout_name,
    parse_layout,
    permutations,
    permute,
    prefix_bits,
    shares_a_table,
    shingles,
    simhash_features,
    simhash_reference,
    table_key,
    table_keys,
    table_range,
    text_simhash,
    tokens,
    unpermute,
    visible_text,
)
from beamcrawl.simweb import SimWeb

fingerprints = st.integers(min_value=0, max_value=(1 << 64) - 1)
tables = st.integers(min_value=0, max_value=len(LAYOUT.orders) - 1)


# --- visible text ------------------------------------------------------------------------


PAGE = b"""<!DOCTYPE html><html><head><title>Head title</title><style>.x{}</style></head>
<body>
<header class="site-header"><div class="logo">Brand</div></header>
<nav><a href="/">Home</a> <a href="/news">News</a></nav>
<div id="cookie-banner">We use cookies</div>
<main><article>
<h1>Article heading</h1>
<p>First paragraph with <b>bold</b> words.</p>
<div class="ad-slot">Buy now</div>
<div class="shadow-box">Kept despite the ad inside shadow</div>
<p hidden>secret</p>
<footer>Article footnote</footer>
</article></main>
<aside class="related">Related stories</aside>
<div class="main-sidebar">Sidebar text</div>
<form><input value="q"><button>Search</button></form>
<script>var tracking = 1;</script><noscript>Enable JavaScript</noscript>
<footer>Copyright footer</footer>
</body></html>"""


def test_visible_text_keeps_content_and_drops_chrome():
    text = visible_text(PAGE)
    for kept in ("Article heading", "First paragraph with", "bold", "Kept despite", "Article footnote"):
        assert kept in text
    for dropped in (
        "Head title",
        "Brand",
        "Home",
        "cookies",
        "Buy now",
        "secret",
        "Related",
        "Sidebar",
        "Search",
        "tracking",
        "Enable JavaScript",
        "Copyright",
    ):
        assert dropped not in text, dropped


@pytest.mark.parametrize(
    "body_tag", ['<body class="home has-sidebar">', '<body id="nav-top">', "<body hidden>", '<body role="banner">']
)
def test_the_body_is_never_chrome(body_tag):
    """A noise word in the body's own class or id (WordPress's has-sidebar), or a hiding
    attribute on it, must not empty the page: only its chrome goes."""
    page = PAGE.replace(b"<body>", body_tag.encode(), 1)
    assert page != PAGE
    text = visible_text(page)
    assert "Article heading" in text and "Kept despite" in text
    assert "Sidebar" not in text and "Copyright" not in text


def test_visible_text_decodes_by_charset():
    body = "<html><body><p>caf\u00e9 cr\u00e8me</p></body></html>".encode("latin-1")
    assert "caf\u00e9 cr\u00e8me" in visible_text(body, "text/html; charset=ISO-8859-1")
    meta = b'<html><head><meta charset="latin-1"></head><body><p>na\xefve</p></body></html>'
    assert "na\u00efve" in visible_text(meta)
    assert visible_text(b"") == "" and visible_text(b"<html></html>").strip() == ""


def test_tokens_drop_stop_words_numbers_and_single_letters():
    assert tokens("The Cat sat on a mat in 2024, at 10:42 -- x y zz Caf\u00e9!") == [
        "cat",
        "sat",
        "mat",
        "zz",
        "caf\u00e9",
    ]


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("ab xyzAZ09_-.,\u00e9\u0663\u00b2\u4e2d\u00df\u0130")) | st.characters(),
        max_size=60,
    )
)
def test_tokens_are_the_word_runs_of_two_or_more_characters_kept(text):
    # tokens() finds runs of 2+ word characters with the regex engine; the definition is
    # every \w+ run, lower-cased, without one-character runs, numbers and stop words.
    import re

    from beamcrawl.core.content.textfp import STOP_WORDS

    expected = [t for t in re.findall(r"\w+", text.lower()) if len(t) > 1 and t not in STOP_WORDS and not t.isdigit()]
    assert tokens(text) == expected


def test_simhash_digests_path_matches_mmh3_hash64():
    from beamcrawl.core.content import textfp

    words = ["alpha", "beta gamma", "caf\u00e9 na\u00efve", "\u4e2d\u6587 \u5b57", "x" * 300]
    fast = textfp._hashes_from_digests(words, len(words))
    assert [int(h) for h in fast] == [textfp.feature_hash(w.encode()) for w in words]
    assert textfp._feature_hashes is textfp._hashes_from_digests  # the fast path is the one in use here


def test_shingles_count_runs_of_words():
    words = "alpha beta gamma alpha beta gamma".split()
    assert shingles(words) == {"alpha beta": 2, "beta gamma": 2, "gamma alpha": 1}
    assert shingles(words, 3) == {"alpha beta gamma": 2, "beta gamma alpha": 1, "gamma alpha beta": 1}
    assert shingles(["one"]) == {"one": 1}
    assert shingles(["one", "two"], 3) == {"one two": 1}
    assert shingles([]) == {}


def test_features_are_words_and_shingles():
    got = features("Apples and pears, apples and plums.")
    assert got == {"apples": 2, "pears": 1, "plums": 1, "apples pears": 1, "pears apples": 1, "apples plums": 1}


# --- simhash -----------------------------------------------------------------------------


weighted_features = st.dictionaries(
    st.text(min_size=1, max_size=30), st.integers(min_value=1, max_value=600), min_size=1, max_size=200
)


@settings(max_examples=300, deadline=None)
@given(weighted_features)
def test_fast_simhash_is_bit_identical_to_the_package(weighted):
    assert simhash_features(weighted) == simhash_reference(weighted)


def test_fast_simhash_matches_the_package_on_real_pages():
    web = SimWeb(50, seed=2, pages_per_host=20, copy_hosts_from=0)
    checked = 0
    for hi in range(0, 50, 3):
        for j in range(20):
            if web.page_kind(hi, j) == "pdf":
                continue
            weighted = features(visible_text(web.page_body(hi, j)))
            assert simhash_features(weighted) == simhash_reference(weighted), (hi, j)
            checked += 1
    assert checked > 200


def test_simhash_recipe_is_stable():
    # Stored rows depend on these bits: a change of tokens, features or hash breaks them.
    text = "The quick brown fox jumps over the lazy dog near the riverbank at dawn again and again"
    assert f"{text_simhash(text):016x}" == GOLDEN
    assert text_simhash(text) == text_simhash(text.upper())


GOLDEN = "57bbd689b520f39d"  # the simhash package's value for these features


def test_too_little_text_has_no_simhash():
    assert text_simhash("Loading, please wait") is None
    assert html_simhash(b"<html><body><p>You need to enable JavaScript to run this app.</p></body></html>") is None
    assert text_simhash(" ".join(f"word{i}x" for i in range(20))) is not None


def test_simhash_is_near_for_small_edits_and_far_for_other_text():
    rng = random.Random(5)
    vocabulary = [f"w{i}x" for i in range(2000)]
    base = [rng.choice(vocabulary) for _ in range(600)]
    edited = list(base)
    edited[300] = "changed"
    other = [rng.choice(vocabulary) for _ in range(600)]
    a, b, c = (text_simhash(" ".join(t)) for t in (base, edited, other))
    assert a is not None and b is not None and c is not None
    assert hamming(a, b) <= MAX_DISTANCE
    assert hamming(a, c) > 10


@settings(max_examples=200)
@given(fingerprints, fingerprints)
def test_hamming(a, b):
    assert hamming(a, b) == bin(a ^ b).count("1") == hamming(b, a)
    assert (hamming(a, b) == 0) == (a == b)


# --- permuted tables ---------------------------------------------------------------------


def test_layout_is_twenty_tables_of_31_to_33_bit_prefixes():
    assert len(permutations()) == 20
    assert {prefix_bits(t) for t in range(20)} == {31, 32, 33}
    assert LAYOUT.max_distance == MAX_DISTANCE == 3
    for order in permutations():
        assert sorted(order) == list(range(6))
    assert len({order[:3] for order in permutations()}) == 20


@settings(max_examples=200)
@given(fingerprints, fingerprints, tables)
def test_permute_is_a_bijection_that_keeps_distances(a, b, t):
    pa, pb = permute(a, t), permute(b, t)
    assert unpermute(pa, t) == a
    assert hamming(pa, pb) == hamming(a, b)
    assert int(LAYOUT.permute_many(np.array([a], dtype=np.uint64), t)[0]) == pa


@settings(max_examples=200)
@given(fingerprints, fingerprints, tables)
def test_each_table_is_one_key_range_sorted_by_permuted_fingerprint(a, b, t):
    lo, hi = table_range(t)
    ka, kb = table_key(t, a), table_key(t, b)
    assert lo <= ka < hi and lo <= kb < hi
    assert len(ka) == 1 + LAYOUT.key_bytes
    if a <= b:
        assert ka <= kb
    # Same prefix, same row.
    width = prefix_bits(t)
    assert (ka == kb) == (a >> (64 - width) == b >> (64 - width))


def test_ten_tables_are_half_the_rows_of_25_to_26_bit_prefixes():
    assert len(TEN_TABLES.orders) == 10 and TEN_TABLES.max_distance == MAX_DISTANCE
    assert set(TEN_TABLES.prefix_widths) == {25, 26} and TEN_TABLES.key_bytes == 4
    assert LAYOUTS == {20: LAYOUT, 10: TEN_TABLES}
    # A fingerprint crosses the table-bucket shuffle once a group: four groups, as for twenty.
    assert [len(g) for g in TEN_TABLES.bucket_groups(8)] == [4, 3, 2, 1]


@pytest.mark.parametrize("layout", [LAYOUT, TEN_TABLES], ids=["twenty", "ten"])
def test_a_layout_is_recorded_by_a_name_that_reads_back(layout):
    name = layout_name(layout)
    assert parse_layout(name) == layout
    assert name == {20: "11,11,11,11,10,10/3", 10: "13,13,13,13,12/2"}[len(layout.orders)]


@settings(max_examples=200)
@given(st.text(max_size=30))
def test_a_recorded_name_that_is_no_layout_is_refused_with_its_reason(name):
    try:
        layout = parse_layout(name)
    except ValueError as exc:
        assert "layout" in str(exc) and "\n" not in str(exc)
    else:  # only the layouts this version keeps read back
        assert layout in LAYOUTS.values() and name == layout_name(layout)


def test_names_of_layouts_this_version_does_not_keep_are_refused():
    for name in ("11,11,11,11,10,10/2", "32,32/1", "13,13,13,13,12", "13,13,13,13,12/x", "64/0", "", "0,0,0,64/1"):
        with pytest.raises(ValueError, match="layout"):
            parse_layout(name)


@settings(max_examples=500)
@given(fingerprints, st.sets(st.integers(min_value=0, max_value=63), max_size=3), st.sampled_from([LAYOUT, TEN_TABLES]))
def test_fingerprints_within_3_bits_share_a_table(fp, flips, layout):
    other = fp
    for bit in flips:
        other ^= 1 << bit
    assert shares_a_table(fp, other, layout)


@pytest.mark.parametrize("layout", [LAYOUT, TEN_TABLES], ids=["twenty", "ten"])
def test_every_3_bit_difference_shares_a_table_exhaustively(layout):
    """All C(64,3) + C(64,2) + 64 neighbours of one fingerprint, every table at once."""
    fp = random.Random(9).getrandbits(64)
    masks = [sum(1 << b for b in bits) for k in (1, 2, 3) for bits in itertools.combinations(range(64), k)]
    others = np.array([fp ^ m for m in masks], dtype=np.uint64)
    shared = np.zeros(len(masks), dtype=bool)
    mine = np.array([fp], dtype=np.uint64)
    for t, width in enumerate(layout.prefix_widths):
        shift = np.uint64(64 - width)
        own = layout.permute_many(mine, t)[0] >> shift
        shared |= (layout.permute_many(others, t) >> shift) == own
    assert shared.all()
    assert len(masks) == 41664 + 2016 + 64


def test_four_bits_can_escape_every_table():
    # The layout is built for 3: one flipped bit in each of four blocks leaves no table's
    # leading blocks intact.
    fp = 0
    other = (1 << 63) | (1 << 52) | (1 << 41) | (1 << 30)  # blocks 0, 1, 2, 3
    assert hamming(fp, other) == 4
    assert not shares_a_table(fp, other)


def test_table_keys_of_one_fingerprint_cover_every_table():
    keys = table_keys(12345)
    assert [k[0] for k in keys] == list(range(20))


@settings(max_examples=300, deadline=None)
@given(fingerprints)
def test_keys_of_are_the_keys_of_the_permuted_fingerprints(fp):
    # keys_of builds each table's key from the leading blocks only; it must equal the key of
    # the fully permuted fingerprint, for the stored layout and for others.
    for layout in (LAYOUT, TableLayout((16, 16, 16, 16), 1), TableLayout((13, 13, 13, 13, 12), 2)):
        expected = [table_key(t, permute(fp, t, layout), layout) for t in range(len(layout.orders))]
        assert layout.keys_of(fp) == expected
    assert table_keys(fp) == LAYOUT.keys_of(fp)


def test_layout_validation():
    with pytest.raises(ValueError):
        TableLayout(widths=(32, 31))
    with pytest.raises(ValueError):
        TableLayout(widths=(32, 32), leading=2)
    four = TableLayout(widths=(16, 16, 16, 16), leading=1)
    assert len(four.orders) == 4 and four.prefix_widths == (16, 16, 16, 16) and four.max_distance == 3
    assert shares_a_table(0, 0b111, four)


# --- on simweb ---------------------------------------------------------------------------


def test_simweb_near_copies_are_close_and_look_alikes_far():
    web = SimWeb(80, seed=4, pages_per_host=30, copy_hosts_from=0)
    near_distances = []
    lookalike = []
    for hi in range(80):
        info = web.host(hi)
        for j in range(1, 30):
            model = web.page_model(hi, j)
            if model.kind == "pdf":
                continue
            fp = html_simhash(web.page_body(hi, j))
            if info.role == "near" and model.kind != "near":
                near_distances.append(hamming(fp, html_simhash(web.page_body(info.copy_of, j))))
            if info.role == "template" and model.kind == "p" and web.page_kind(hi, j - 1) == "p":
                lookalike.append(hamming(fp, html_simhash(web.page_body(hi, j - 1))))
    assert len(near_distances) > 100 and len(lookalike) > 30
    assert sum(d <= MAX_DISTANCE for d in near_distances) / len(near_distances) >= 0.95
    assert min(lookalike) > 2 * MAX_DISTANCE


# --- headers and footers deep in a page -----------------------------------------------------------

_NESTING = st.sampled_from(
    ["<div>", "</div>", "<article>", "</article>", "<main>", "</main>", "<section>", "<header>", "</header>",
     "<footer>", "</footer>", "<svg>", "<table>", "<td>", "<p>", "x", "<template>", "</template>"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_NESTING, max_size=40))
def test_inside_content_is_answered_as_each_node_alone_answers_it(pieces):
    from beamcrawl.core.content import textfp
    from beamcrawl.core.content.htmlparse import parse_document

    tree = parse_document("".join(pieces).encode())
    test = textfp._inside_content_test()  # one per tree, asked of its nodes in document order
    nodes = tree.css("*")
    assert [test(node) for node in nodes] == [textfp._inside_content(node) for node in nodes]


@settings(max_examples=6, deadline=None)
@given(
    tag=st.sampled_from(["header", "footer"]),
    depth=st.integers(200, 500),
    count=st.integers(20_000, 50_000),
    wrapper=st.sampled_from(["div", "section", "span", "article"]),
)
@example(tag="footer", depth=500, count=50_000, wrapper="div")  # 2.6 s, where at the top 0.04 s
def test_headers_deep_in_a_page_cost_what_they_cost_at_its_top(tag, depth, count, wrapper):
    # Each header and footer walked all its ancestors to learn whether one was an <article>
    # or a <main>: 60,000 <footer> 500 elements deep (1 MB) took 3 s. The same footers at
    # the top of the body are the measure; the margin is for a loaded machine.
    import time

    from beamcrawl.core.content.htmlparse import parse_document
    from beamcrawl.core.content.textfp import tree_text

    def cpu(depth: int) -> float:
        tree = parse_document((f"<{wrapper}>" * depth + f"<{tag}>x</{tag}>" * count).encode())
        started = time.process_time()
        text_simhash(tree_text(tree))
        return time.process_time() - started

    assert cpu(depth) < 10 * min(cpu(0), cpu(0)) + 0.1
