"""Tests for beamcrawl.core.content.sniff: content recognition and charset detection, on real bytes."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import re
import sys
import zipfile
from urllib.parse import quote, unquote_to_bytes

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from beamcrawl.core.content.htmlparse import parse_html
from beamcrawl.core.content.sniff import (
    BINARY_KINDS,
    Charset,
    codec_for_label,
    decode_html,
    detect_charset,
    magic,
    media_type,
    sniff,
)
from beamcrawl.core.urls.urlnorm import normalize

# --- real file headers --------------------------------------------------------------------------


def _pillow(fmt: str, **kw: object) -> bytes:
    image_mod = pytest.importorskip("PIL.Image")
    buf = io.BytesIO()
    image_mod.new("RGB", (8, 8), (200, 30, 30)).save(buf, format=fmt, **kw)
    return buf.getvalue()


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("word/document.xml", "<w:document/>")
    return buf.getvalue()


# Headers as encoders write them, for formats with no encoder at hand (byte for byte the
# start of files made by ffmpeg, lame, oggenc and fonttools).
MP4 = b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2avc1mp41" + b"\x00\x00\x00\x08free"
MOV = b"\x00\x00\x00\x14ftypqt  \x00\x00\x02\x00qt  \x00\x00\x00\x08wide"
M4A = b"\x00\x00\x00\x1cftypM4A \x00\x00\x02\x00M4A isomiso2"
AVIF = b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1miaf"
WEBM = bytes.fromhex("1a45dfa39f4286810142f7810142f2810442f381084282847765626d42878104428581021853806701")
MP3_ID3 = b"ID3\x04\x00\x00\x00\x00\x00\x23TSSE\x00\x00\x00\x0f\x00\x00\x03Lavf58.76.100\x00"
MP3_FRAME = b"\xff\xfb\x90\x64" + bytes(60)
OGG = b"OggS\x00\x02" + bytes(20) + b"\x01\x1e\x01vorbis"
FLAC = b"fLaC\x00\x00\x00\x22\x10\x00\x10\x00"
WAV = b"RIFF\x24\x08\x00\x00WAVEfmt \x10\x00\x00\x00"
AVI = b"RIFF\x00\x10\x00\x00AVI LIST"
WOFF2 = b"wOF2\x00\x01\x00\x00\x00\x00\x5c\x1c\x00\x0a"
WASM = b"\x00asm\x01\x00\x00\x00"
OLE2 = bytes.fromhex("d0cf11e0a1b11ae1") + bytes(24)


def _elf() -> bytes:
    with open(sys.executable, "rb") as f:
        return f.read(64)


@pytest.mark.parametrize(
    ("make", "fmt", "kind"),
    [
        (lambda: _pillow("PNG"), "png", "image"),
        (lambda: _pillow("JPEG"), "jpeg", "image"),
        (lambda: _pillow("GIF"), "gif", "image"),
        (lambda: _pillow("WEBP"), "webp", "image"),
        (lambda: _pillow("TIFF"), "tiff", "image"),
        (lambda: _pillow("PDF"), "pdf", "pdf"),
        (lambda: gzip.compress(b"<html>" * 100), "gzip", "archive"),
        (_zip, "zip", "archive"),
        (lambda: bz2.compress(b"<html>" * 100), "bzip2", "archive"),
        (lambda: lzma.compress(b"<html>" * 100), "xz", "archive"),
        (_elf, "elf", "executable"),
        (lambda: MP4, "mp4", "video"),
        (lambda: MOV, "mp4", "video"),
        (lambda: M4A, "m4a", "audio"),
        (lambda: AVIF, "heif", "image"),
        (lambda: WEBM, "matroska", "video"),
        (lambda: MP3_ID3, "mp3", "audio"),
        (lambda: OGG, "ogg", "audio"),
        (lambda: FLAC, "flac", "audio"),
        (lambda: WAV, "wav", "audio"),
        (lambda: AVI, "avi", "video"),
        (lambda: WOFF2, "woff2", "font"),
        (lambda: WASM, "wasm", "executable"),
        (lambda: OLE2, "ole2", "document"),
    ],
)
def test_magic_recognises_real_headers(make, fmt: str, kind: str) -> None:
    body = make()
    assert magic(body) == (fmt, kind)
    # A lying label does not make it HTML; a missing one does not either.
    assert sniff("text/html; charset=utf-8", body) == f"binary:{kind}"
    assert sniff(None, body) == f"binary:{kind}"
    assert kind in BINARY_KINDS


@pytest.mark.parametrize(
    ("make", "kind"),
    [(lambda: _pillow("BMP"), "image"), (lambda: _pillow("ICO"), "image"), (lambda: MP3_FRAME, "audio")],
)
def test_weak_signatures_only_without_a_label(make, kind: str) -> None:
    body = make()
    assert magic(body) is None and magic(body, weak=True)[1] == kind
    assert sniff(None, body) == f"binary:{kind}"
    assert sniff("application/octet-stream", body) == f"binary:{kind}"
    assert sniff("text/html", body) == "html"  # "BM..." could be text: the label stands


@pytest.mark.parametrize(
    ("content_type", "head", "expected"),
    [
        ("text/html", b"<!doctype html><p>hi", "html"),
        ("TEXT/HTML; charset=ISO-8859-1", b"<p>hi", "html"),
        ("text/html", b"", "html"),
        ("application/xhtml+xml", b"<?xml version='1.0'?><html>", "xhtml"),
        ("application/xml", b"<?xml version='1.0'?><urlset>", "xml"),
        ("text/xml", b"<urlset>", "xml"),
        ("application/rss+xml", b"<rss>", "xml"),
        ("application/atom+xml; charset=utf-8", b"<feed>", "xml"),
        ("image/svg+xml", b"<svg xmlns='http://www.w3.org/2000/svg'>", "binary:image"),
        ("text/plain", b"<!doctype html><p>hi", "text"),  # never upgraded, as in browsers
        ("text/css", b"body{}", "text"),
        ("application/json", b"{}", "text"),
        ("application/ld+json", b"{}", "text"),
        ("application/pdf", b"", "binary:pdf"),
        ("image/jpeg", b"", "binary:image"),
        ("video/mp4", b"", "binary:video"),
        ("audio/mpeg", b"", "binary:audio"),
        ("font/woff2", b"", "binary:font"),
        ("application/font-woff", b"", "binary:font"),
        ("application/msword", b"", "binary:document"),
        (
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            b"PK\x03\x04",
            "binary:document",
        ),
        ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", b"", "binary:document"),
        ("application/zip", b"", "binary:archive"),
        ("application/x-msdownload", b"", "binary:executable"),
        ("application/x-shockwave-flash", b"", "binary:other"),
        # no usable label: the bytes decide (WHATWG MIME sniffing)
        (None, b"  \n<!DOCTYPE HTML PUBLIC>", "html"),
        ("", b"<html><body>", "html"),
        ("application/octet-stream", b"<HTML>", "html"),
        ("unknown/unknown", b"<!-- comment --><p>", "html"),
        (None, b"<a href=x>link</a>", "html"),
        (None, b"<abbr>not a listed tag", "text"),
        (None, b"<?xml version='1.0'?><urlset/>", "xml"),
        (None, b"<?xml version='1.0'?><!DOCTYPE html><html xmlns='x'>", "xhtml"),
        (None, b"<rss version='2.0'>", "xml"),
        (None, b"\xef\xbb\xbf<html>", "html"),
        (None, "<html><body>".encode("utf-16"), "html"),
        (None, "plain words".encode("utf-16"), "text"),
        (None, b"just some text", "text"),
        (None, b"\x00\x01\x02\x03binary", "binary:other"),
        ("foo/bar", b"<p>x", "html"),
    ],
)
def test_sniff(content_type: str | None, head: bytes, expected: str) -> None:
    assert sniff(content_type, head) == expected


def test_media_type() -> None:
    assert media_type(" Text/HTML ; charset=x") == "text/html"
    assert media_type(None) == media_type("") == ""


# --- charsets ----------------------------------------------------------------------------------

SAMPLES = {
    "cp1252": "Café crème brûlée — naïve façade, “quotes” and € signs. ",
    "cp1251": "Привет, как дела? Это тестовая страница на русском языке. ",
    "koi8-r": "Привет, как дела? Это тестовая страница на русском языке. ",
    "cp932": "これは日本語のテストページです。東京は大きな都市です。",
    "euc_jp": "これは日本語のテストページです。東京は大きな都市です。",
    "gb18030": "这是一个中文测试页面。北京是中国的首都。",
    "big5hkscs": "這是一個中文測試頁面。台北是一個城市。",
    "cp949": "이것은 한국어 테스트 페이지입니다. 서울은 큰 도시입니다.",
    "iso8859-7": "Αυτή είναι μια δοκιμαστική σελίδα στα ελληνικά. ",
    "cp1250": "Příliš žluťoučký kůň úpěl ďábelské ódy. Zażółć gęślą jaźń. ",
}


def _page(text: str, head: str = "") -> str:
    return f"<html><head>{head}<title>t</title></head><body><p>{text * 20}</p><a href='/x'>x</a></body></html>"


@pytest.mark.parametrize("encoding", sorted(SAMPLES))
def test_undeclared_legacy_pages_decode_right(encoding: str) -> None:
    """No header, no meta, not UTF-8: the detector (with the windows-1252 preference) gets
    each of these right; the plain windows-1252 fallback got only the first two."""
    page = _page(SAMPLES[encoding])
    body = page.encode(encoding)
    text, charset = decode_html(body)
    assert charset.source == "detected"
    assert text == page


def test_without_the_detector_the_fallback_is_windows_1252() -> None:
    body = _page(SAMPLES["cp1251"]).encode("cp1251")
    assert detect_charset(body, detect=False) == Charset("cp1252", "default")


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (b"\xef\xbb\xbf<p>caf\xc3\xa9", "text/html; charset=iso-8859-1", Charset("utf-8-sig", "bom")),
        ("\ufeff<p>café".encode("utf-16-le"), None, Charset("utf-16", "bom")),
        (b"<p>caf\xe9", "text/html; charset=ISO-8859-1", Charset("cp1252", "header")),
        (b"<p>caf\xe9", 'text/html; charset="windows-1252"', Charset("cp1252", "header")),
        (b"<p>x", "text/html;charset=Shift_JIS", Charset("cp932", "header")),
        (b"<p>x", "text/html; charset=gb2312", Charset("gb18030", "header")),
        (b"<p>x", "text/html; charset=utf-7", Charset("utf-8", "utf-8")),  # UTF-7 is ignored
        (b"<p>x", "text/html; charset=base64", Charset("utf-8", "utf-8")),  # not a text codec
        (b"<p>x", "text/html; charset=bogus", Charset("utf-8", "utf-8")),
        (b'<meta charset="koi8-r"><p>\xf0\xd2\xc9', "text/html", Charset("koi8-r", "meta")),
        (b"<meta charset=windows-1251>", None, Charset("cp1251", "meta")),
        (
            b'<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=euc-kr">',
            None,
            Charset("cp949", "meta"),
        ),
        (
            b"<meta content='text/html; charset=big5' http-equiv='content-type'>",
            None,
            Charset("big5hkscs", "meta"),
        ),
        (b'<meta charset="utf-16">\xc3\xa9', None, Charset("utf-8", "meta")),  # ASCII bytes said it
        (b"<!-- <meta charset=koi8-r> --><p>caf\xc3\xa9", None, Charset("utf-8", "utf-8")),
        (b"<meta name=description content='charset=koi8-r'>", None, Charset("utf-8", "utf-8")),
        (b"<?xml version='1.0' encoding='ISO-8859-2'?><html>", None, Charset("iso8859-2", "meta")),
        (b"<p>caf\xc3\xa9", None, Charset("utf-8", "utf-8")),
        (b"<p>plain ascii", None, Charset("utf-8", "utf-8")),
        (b"<p>cut in the middle of \xe2\x82", None, Charset("utf-8", "utf-8")),  # a capped body
    ],
)
def test_detect_charset_order(body: bytes, content_type: str | None, expected: Charset) -> None:
    assert detect_charset(body, content_type) == expected


def test_meta_beyond_the_scan_window_is_not_seen() -> None:
    body = b"<html><head>" + b" " * 5000 + b"<meta charset=koi8-r>"
    assert detect_charset(body).source == "utf-8"


@pytest.mark.parametrize(
    ("label", "codec"),
    [
        ("utf8", "utf-8"),
        ("UTF-8", "utf-8"),
        ("latin1", "cp1252"),
        ("us-ascii", "cp1252"),
        ("iso-8859-9", "cp1254"),
        ("tis-620", "cp874"),
        ("windows-874", "cp874"),
        ("x-sjis", "cp932"),
        ("euc-kr", "cp949"),
        ("big5", "big5hkscs"),
        ("x-mac-cyrillic", "mac-cyrillic"),
        ("iso-8859-8-i", "iso8859-8"),
        ("utf-16le", "utf-16-le"),
        ("", None),
        (None, None),
        ("rot13", None),
        ("utf-7", None),
        ("x" * 100, None),
    ],
)
def test_codec_for_label(label: str | None, codec: str | None) -> None:
    assert codec_for_label(label) == codec


def test_decoding_never_raises_on_undefined_bytes() -> None:
    # 0xAA, 0xD2 and 0xFF are undefined in windows-1253: they become U+FFFD, they do not raise.
    text, charset = decode_html(b"<p>\xaa\xd2\xff", "text/html; charset=windows-1253")
    assert charset.encoding == "cp1253" and text == "<p>\ufffd\ufffd\ufffd"
    # windows-1252 has no undefined byte: 0x81, 0x8D, 0x8F, 0x90, 0x9D are C1 controls.
    text, charset = decode_html(b"<p>\x81\x8d\x8f\x90\x9d", "text/html; charset=windows-1252")
    assert charset.encoding == "cp1252" and text == "<p>\x81\x8d\x8f\x90\x9d"


def test_detection_cost_is_bounded() -> None:
    """Only undeclared non-UTF-8 pages pay for the detector, and only on 64 KiB of them."""
    body = _page(SAMPLES["cp1252"]).encode("cp1252") * 2000  # ~2.4 MB
    assert detect_charset(body).encoding == "cp1252"  # its cost: bench/speed_claims.py


@pytest.mark.parametrize(
    "text",
    [
        b"ID3 tags explained",
        b"fLaC is a codec",
        b"MThd header",
        b"OTTO the bear",
        b"BZh9 notes",
        b"dex\nfile",
        b"8BPS format",
        b"wOFF fonts",
        b"MSCF cabinets",
    ],
)
def test_text_that_starts_like_a_signature_stays_text(text: bytes) -> None:
    assert sniff("text/plain", text) == "text"
    assert sniff("text/html", text) == "html"


@given(
    label=st.sampled_from(["iso-2022-kr", "csiso2022kr", "hz-gb-2312", "iso-2022-cn", "iso-2022-cn-ext"]),
    upper=st.booleans(),
    in_meta=st.booleans(),
    body=st.binary(max_size=40),
)
@settings(max_examples=200, deadline=None)
def test_the_replacement_encodings_labels_read_a_document_as_one_replacement_character(
    label: str, upper: bool, in_meta: bool, body: bytes
) -> None:
    # The Encoding Standard maps these labels to its replacement encoding: the document is
    # one U+FFFD, no markup in it, so none of its links (a reader that knows no such
    # encoding must not find markup the browser never shows).
    label = label.upper() if upper else label
    page = (f'<meta charset="{label}">'.encode() if in_meta else b"") + b"<a href=/hidden>x</a>" + body
    text, charset = decode_html(page, None if in_meta else f"text/html; charset={label}")
    assert text == "\ufffd" and charset.source == ("meta" if in_meta else "header")
    content_type = "text/html" if in_meta else f"text/html; charset={label}"
    assert parse_html(page, "http://e.com/", content_type).links == []


# --- the <meta> prescan reads tags as the HTML tokenizer reads them -----------------------------

_LABELS_SEEN = st.sampled_from(["shift_jis", "EUC-JP", "windows-1251", "bogus", "utf-16", "x-user-defined", "koi8-r"])


def _quoted(draw: st.DrawFn, value: str) -> str:
    quote = draw(st.sampled_from(['"', "'", ""]))
    if not quote and (not value or any(c in value for c in " \t\n>\"'=<`")):
        quote = '"' if '"' not in value else "'"
    return f"{quote}{value}{quote}"


@st.composite
def _prescan_documents(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(["meta", "meta", "meta", "tag", "comment", "text", "other"]))
        if kind == "meta":
            attrs = []
            for _ in range(draw(st.integers(0, 4))):
                which = draw(st.sampled_from(["charset", "http-equiv", "content", "name", "junk"]))
                if which == "charset":
                    value = draw(_LABELS_SEEN)
                elif which == "http-equiv":
                    value = draw(st.sampled_from(["content-type", "Content-Type", "refresh", "content-type "]))
                elif which == "content":
                    label = draw(_LABELS_SEEN)
                    value = draw(
                        st.sampled_from(["text/html; charset={}", "charset = {}", "x;charset={};y", "CHARSET={} x"])
                    )
                    value = value.format(label)
                else:
                    value = draw(st.sampled_from(["x", "a>b", "<meta charset=euc-jp>", ""]))
                name = "data-x" if which == "junk" else which
                name = name.upper() if draw(st.booleans()) else name
                attrs.append(f"{name}={_quoted(draw, value)}")
            sep = draw(st.sampled_from([" ", "/", "\t", "\n"]))
            parts.append(f"<{draw(st.sampled_from(['meta', 'META', 'Meta']))}{sep}{' '.join(attrs)}>")
        elif kind == "tag":
            name = draw(st.sampled_from(["p", "x-y", "div", "/p", "span", "meta-x", "metax"]))
            value = draw(st.sampled_from(["<meta charset=euc-jp>", "a>b", "x", "<!--"]))
            parts.append(f"<{name} title={_quoted(draw, value)}>")
        elif kind == "comment":
            inner = draw(st.sampled_from(["<meta charset=euc-jp>", "x", "-", ""]))
            parts.append(draw(st.sampled_from(["<!--{}-->", "<!-->{}", "<!--->{}", "<!---{}--->"])).format(inner))
        elif kind == "text":
            parts.append(draw(st.sampled_from(["x", " ", "\n", "a > b", "1 < 2"])))
        else:
            parts.append(draw(st.sampled_from(["<!doctype html>", "<?php x ?>", "</ x>", "<!x>"])))
    return "".join(parts)


def _content_label(content: str) -> str | None:
    """HTML's "extracting a character encoding from a meta element", as written."""
    for at in (m.start() for m in re.finditer("charset", content)):
        found = re.match(r"charset[\t\n\f\r ]*=[\t\n\f\r ]*(.*)", content[at:], re.DOTALL)
        if found is None:
            continue
        rest = found.group(1)
        if rest[:1] in ('"', "'"):
            close = rest.find(rest[0], 1)
            return rest[1:close] if close > 0 else None
        return re.split(r"[\t\n\f\r ;]", rest, maxsplit=1)[0] or None
    return None


def _tokenizer_reading(doc: str) -> str | None:
    """The prescan's answer from the tags the HTML parser built: the first <meta> whose
    attributes declare an encoding."""
    from selectolax.lexbor import LexborHTMLParser

    for node in LexborHTMLParser(doc).css("meta"):
        attrs = {k.lower(): (v or "").lower() for k, v in node.attributes.items()}
        if "charset" in attrs:
            codec = codec_for_label(attrs["charset"], in_document=True)
        elif "content" in attrs and attrs.get("http-equiv") == "content-type":
            label = _content_label(attrs["content"])
            codec = codec_for_label(label, in_document=True) if label is not None else None
        else:
            codec = None
        if codec is not None:
            return codec
    return None


@given(doc=_prescan_documents())
@example(doc='<meta content="a>b" charset=shift_jis>')
@example(doc="<!--><meta charset=shift_jis>-->")
@example(doc='<p title="<meta charset=euc-jp>"><meta charset=shift_jis>')
@example(doc="<meta-x charset=shift_jis>")
@example(doc="<meta charset=bogus><meta charset=shift_jis>")
@settings(max_examples=500, deadline=None)
def test_the_meta_prescan_reads_tags_as_the_tokenizer_does(doc: str) -> None:
    charset = detect_charset(doc.encode("ascii") + b"\x93\xfa", detect=False)
    expected = _tokenizer_reading(doc)
    assert (charset.encoding if charset.source == "meta" else None) == expected


@pytest.mark.parametrize(
    "content, codec",
    [
        ("text/html; charset=shift_jis", "cp932"),
        ("text/html; charset='shift_jis'", "cp932"),
        ("text/html; charset='shift_jis", None),  # an unclosed quote: no encoding
        ("text/html; charset=shift_jis,utf-8", None),  # the label runs to a space or ";"
        ("text/html; charset=shift_jis;x", "cp932"),
        ("charset x charset=koi8-r", "koi8-r"),
    ],
)
def test_a_content_types_charset_is_read_as_the_prescan_reads_it(content: str, codec: str | None) -> None:
    page = f'<meta http-equiv="content-type" content="{content}">'.encode() + b"\x93\xfa"
    charset = detect_charset(page, detect=False)
    assert (charset.encoding if charset.source == "meta" else None) == codec


# The Encoding Standard's multi-byte decoders, step by step as it writes them (a queue of bytes,
# some restored to it), for what each error consumes and which bytes are read again. Which
# character a whole unit is, is what the page reads that unit alone as (EUC-JP's two bytes,
# Shift_JIS's reading of the same pointer, below): the indexes are not what this checks.
# Single bytes are the standard's: ASCII; Shift_JIS 0x80 and katakana 0xA1-0xDF; gb18030 0x80
# the euro sign; anything else not a lead byte is an error.
_MULTI_BYTE = {  # label: (codec, lead bytes)
    "shift_jis": ("cp932", {*range(0x81, 0xA0), *range(0xE0, 0xFD)}),
    "euc-jp": ("euc_jp", {0x8E, 0x8F, *range(0xA1, 0xFF)}),
    "big5": ("big5hkscs", set(range(0x81, 0xFF))),
    "gbk": ("gb18030", set(range(0x81, 0xFF))),
    "euc-kr": ("cp949", set(range(0x81, 0xFF))),
}


def _unit(label: str, unit: bytes) -> str | None:
    """What a whole unit reads as alone (the indexes are tested apart), None for an error."""
    if label == "euc-jp" and len(unit) == 2 and all(0xA1 <= b <= 0xFE for b in unit):  # jis0208
        char = _shift_jis_reading((unit[0] - 0xA1) * 94 + unit[1] - 0xA1)
        return None if char == "\ufffd" else char
    text = decode_html(b"<p>" + unit, f"text/html; charset={label}")[0][3:]
    return None if "\ufffd" in text else text


def _standard_multi_byte(label: str, body: bytes) -> str:
    codec, leads = _MULTI_BYTE[label]
    queue = list(body)
    out: list[str] = []
    while queue:
        byte = queue.pop(0)
        if byte < 0x80:
            out.append(chr(byte))
        elif codec == "cp932" and (byte == 0x80 or 0xA1 <= byte <= 0xDF):
            out.append(chr(byte) if byte == 0x80 else chr(0xFF61 - 0xA1 + byte))
        elif codec == "gb18030" and byte == 0x80:
            out.append("\u20ac")
        elif byte not in leads or not queue:
            out.append("\ufffd")
        elif codec == "gb18030" and 0x30 <= queue[0] <= 0x39:
            second = queue.pop(0)
            if not queue:
                out.append("\ufffd")
            elif not 0x81 <= queue[0] <= 0xFE:
                queue[0:0] = [second]
                out.append("\ufffd")
            else:
                third = queue.pop(0)
                if not queue:
                    out.append("\ufffd")
                elif not 0x30 <= queue[0] <= 0x39:
                    queue[0:0] = [second, third]
                    out.append("\ufffd")
                else:
                    out.append(_unit(label, bytes([byte, second, third, queue.pop(0)])) or "\ufffd")
        else:
            unit = [byte, queue.pop(0)]
            if codec == "euc_jp" and byte == 0x8F and 0xA1 <= unit[1] <= 0xFE:
                if not queue:
                    out.append("\ufffd")
                    continue
                unit.append(queue.pop(0))
            char = _unit(label, bytes(unit))
            if char is None and unit[-1] < 0x80:
                queue[0:0] = [unit[-1]]  # an ASCII byte that ends no character is itself
            out.append(char or "\ufffd")
    return "".join(out)


_MULTI_BYTE_ALPHABET = st.one_of(
    st.integers(0x80, 0xFF),
    st.sampled_from(b'09"<>=/azAZ@[_~ '),
)


@given(label=st.sampled_from(sorted(_MULTI_BYTE)), raw=st.lists(_MULTI_BYTE_ALPHABET, max_size=12).map(bytes))
@example(label="shift_jis", raw=b"\xef\x87mail")  # "\x87m" was read as one character: the "m" lost
@example(label="euc-kr", raw=b"\xd4\x85Z")  # likewise "\x85Z"
@example(label="big5", raw=b"\x84\xfeO3")  # likewise "\xfeO"
@example(label="gbk", raw=b"\xf38\xa27")  # one error read as two and two digits
@example(label="gbk", raw=b"\xff3")  # at the end, the "3" was lost
@example(label="euc-jp", raw=b"\x8fJ")  # at the end, the "J" was lost
@example(label="big5", raw=b"\xa2\x8a")  # one error read as two
@example(label="shift_jis", raw=b"\xeb\xaa")  # one error read as an error and a katakana
@example(label="shift_jis", raw=b"\xa0\xfd\xfe\xff")  # cp932's U+F8F0-U+F8F3, no characters
@settings(max_examples=1500, deadline=None)
def test_multi_byte_pages_err_as_the_encoding_standard_reads_them(label: str, raw: bytes) -> None:
    text, charset = decode_html(b"<p>" + raw, f"text/html; charset={label}")
    assert charset.encoding == _MULTI_BYTE[label][0]
    assert text == "<p>" + _standard_multi_byte(label, raw)


@pytest.mark.parametrize(
    "label, raw, path",
    [
        ("shift_jis", b"\xef\x87mail", "%EF%BF%BDmail"),
        ("euc-kr", b"\xd4\x85Zip", "%EF%BF%BDZip"),
        ("big5", b"\x84\xfeOk", "%EF%BF%BDOk"),
        ("gbk", b"\xe33\xa97]", "%EF%BF%BD%5D"),
        ("shift_jis", b"\xa0?q=\xfd", "%EF%BF%BD?q=%26%2365533%3B"),
    ],
)
def test_a_link_on_a_multi_byte_page_keeps_the_ascii_after_a_bad_byte(label: str, raw: bytes, path: str) -> None:
    # A lead byte and a byte that ends no character with it are one error: the codec read the
    # second as a lead, and the ASCII byte after it as its trail (Shift_JIS "\x87m" is U+334A).
    out = parse_html(b'<a href="/' + raw + b'">x</a>', "http://e.com/", f"text/html; charset={label}")
    assert out.links[0][0] == "http://e.com/" + path


# A Content-Type's parameters, written out by the grammar (RFC 9110 §5.6.6: a token, or a
# quoted-string with its backslash escapes; optional whitespace after each ";"), with names a
# reader that looks for "charset=" anywhere would take for it.
_PARAM_NAMES = ["charset", "Charset", "xcharset", "foo", "charset-x", "x"]
_PARAM_VALUES = ["shift_jis", "euc-kr", "koi8-r", "utf-8", "gbk", "charset=euc-kr", "a; charset=koi8-r", 'x"y\\z', ""]


def _param_value(value: str, quote: bool) -> str:
    if not quote and re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@given(
    params=st.lists(
        st.tuples(
            st.sampled_from(_PARAM_NAMES),
            st.sampled_from(_PARAM_VALUES),
            st.booleans(),
            st.sampled_from(["", " ", "\t"]),
        ),
        max_size=4,
    )
)
@example(params=[("xcharset", "shift_jis", False, " ")])
@example(params=[("foo", "charset=euc-kr", False, " ")])
@example(params=[("charset", "gbk", True, "")])
@settings(max_examples=500, deadline=None)
def test_a_headers_charset_is_its_charset_parameter(params: list[tuple[str, str, bool, str]]) -> None:
    header = "text/html" + "".join(
        f";{space}{name}={_param_value(value, quote)}" for name, value, quote, space in params
    )
    # The first parameter named charset, in any case, is the label; none: the page says.
    labels = [value for name, value, _, _ in params if name.lower() == "charset"]
    expected = codec_for_label(labels[0]) if labels and labels[0] else None
    charset = detect_charset(b"<p>\x93\xfa", header, detect=False)
    assert (charset.encoding if charset.source == "header" else None) == expected


@pytest.mark.parametrize(
    "header, codec",
    [
        ("text/html; charset = shift_jis", None),  # no whitespace around "=" in a parameter
        ('text/html; charset="sh\\ift_jis"', "cp932"),  # a quoted-pair is the character
        ('text/html; charset="euc-kr', "cp949"),  # an unclosed quoted-string runs to the end
        ("text/html; charset=shift_jis, text/html", "cp932"),  # the type again keeps its charset
        ("text/html; charset=shift_jis, text/plain", None),  # another type: its charset (none)
        ('text/plain; a=",text/html; charset=gbk"', None),  # a comma in a quoted-string
    ],
)
def test_a_headers_charset_is_read_as_fetch_reads_the_header(header: str, codec: str | None) -> None:
    charset = detect_charset(b"<p>\x93\xfa", header, detect=False)
    assert (charset.encoding if charset.source == "header" else None) == codec


# EUC-JP and Shift_JIS read JIS X 0208 by one index, jis0208, the Encoding Standard's pointer
# written (lead - 0xA1) * 94 + trail - 0xA1 in EUC-JP; Shift_JIS has its own arithmetic.
def _shift_jis_bytes(pointer: int) -> bytes:
    row, cell = divmod(pointer, 188)
    return bytes((row + (0x81 if row < 0x1F else 0xC1), cell + (0x40 if cell < 0x3F else 0x41)))


def _shift_jis_reading(pointer: int) -> str:
    """The character at ``pointer``, U+FFFD for none (an ASCII trail byte is then read again)."""
    text = decode_html(b"<p>" + _shift_jis_bytes(pointer), "text/html; charset=shift_jis")[0][3:]
    return text if len(text) == 1 else "\ufffd"


@pytest.fixture(scope="module")
def jis0208_first_pointers() -> dict[str, int]:
    """Each character's first pointer below 8836, as Shift_JIS reads them: what an encoder
    writes for the character."""
    first: dict[str, int] = {}
    for pointer in range(8836):
        char = _shift_jis_reading(pointer)
        if char != "\ufffd":
            first.setdefault(char, pointer)
    return first


@given(cells=st.lists(st.tuples(st.integers(0xA1, 0xFE), st.integers(0xA1, 0xFE)), min_size=1, max_size=4))
@example(cells=[(0xAD, 0xA1)])  # ①, NEC's row 13: an error to Python's euc_jp
@example(cells=[(0xFC, 0xE2)])  # 髙, an IBM kanji in NEC's row 92: likewise
@example(cells=[(0xA1, 0xC1)])  # ～, U+FF5E: Python's euc_jp reads U+301C
@settings(max_examples=400, deadline=None)
def test_an_euc_jp_page_reads_and_writes_jis_x_0208_as_shift_jis_does(
    cells: list[tuple[int, int]], jis0208_first_pointers: dict[str, int]
) -> None:
    raw = bytes(b for cell in cells for b in cell)
    pointers = [(lead - 0xA1) * 94 + trail - 0xA1 for lead, trail in cells]
    chars = [_shift_jis_reading(p) for p in pointers]
    out = parse_html(b'<a href="/p?q=' + raw + b'">' + raw + b"</a>", "http://e.com/", "text/html; charset=euc-jp")
    [(url, _, anchor, _, _)] = out.links
    assert anchor == " ".join("".join(chars).split())
    written = ""
    for char in chars:
        if char == "\ufffd":
            written += "%26%2365533%3B"
        else:
            first = jis0208_first_pointers[char]
            written += f"%{first // 94 + 0xA1:02X}%{first % 94 + 0xA1:02X}"
    assert url == "http://e.com/p?q=" + written


@pytest.mark.parametrize(
    "reference, written",
    [
        ("&#x7E8A;", "%F9%A1"),  # 纊: index jis0208's first pointer, not JIS X 0212's 0x8FD4E3
        ("&#xA2;", "%26%23162%3B"),  # ¢ is not in index jis0208 (U+FFE0 is): Python wrote ￠'s cell
        ("&#x2212;", "%A1%DD"),  # − is written as －
        ("&#xFF71;", "%8E%B1"),  # halfwidth katakana
    ],
)
def test_an_euc_jp_pages_link_query_is_written_as_the_encoding_standard_writes_it(reference: str, written: str) -> None:
    out = parse_html(f'<a href="/p?q={reference}">x</a>'.encode(), "http://e.com/", "text/html; charset=euc-jp")
    assert out.links[0][0] == "http://e.com/p?q=" + written


def _standard_iso2022_jp(body: bytes) -> str:
    """The Encoding Standard's ISO-2022-JP decoder, step by step (index jis0208 as Shift_JIS
    reads it)."""
    queue = list(body)
    out: list[str] = []
    state = output_state = "ascii"
    lead = 0
    output = False
    while True:
        byte = queue.pop(0) if queue else None
        if state in ("ascii", "roman", "katakana", "lead"):
            if byte == 0x1B:
                state = "escape start"
                continue
            if byte is None:
                return "".join(out)
            output = False
            if state == "lead" and 0x21 <= byte <= 0x7E:
                lead, state = byte, "trail"
            elif state == "katakana":
                out.append(chr(0xFF61 - 0x21 + byte) if 0x21 <= byte <= 0x5F else "\ufffd")
            elif state == "lead" or byte > 0x7F or byte in (0x0E, 0x0F):
                out.append("\ufffd")
            else:
                roman = {0x5C: "\u00a5", 0x7E: "\u203e"} if state == "roman" else {}
                out.append(roman.get(byte, chr(byte)))
        elif state == "trail":
            if byte == 0x1B:
                state = "escape start"
                out.append("\ufffd")
                continue
            state = "lead"
            if byte is not None and 0x21 <= byte <= 0x7E:
                out.append(_shift_jis_reading((lead - 0x21) * 94 + byte - 0x21))
            else:
                out.append("\ufffd")
        elif state == "escape start":
            if byte in (0x24, 0x28):
                lead, state = byte, "escape"
                continue
            if byte is not None:
                queue.insert(0, byte)
            output, state = False, output_state
            out.append("\ufffd")
        else:  # escape
            switch = {(0x28, 0x42): "ascii", (0x28, 0x4A): "roman", (0x28, 0x49): "katakana"}.get((lead, byte))
            switch = switch or ("lead" if lead == 0x24 and byte in (0x40, 0x42) else None)
            if switch is not None:
                state = output_state = switch
                if output:
                    out.append("\ufffd")
                output = True
                continue
            queue[0:0] = [lead] if byte is None else [lead, byte]
            output, state = False, output_state
            out.append("\ufffd")


_ISO2022_JP_ALPHABET = st.one_of(
    st.sampled_from(b'\x1b\x1b\x1b$(BJI@A\x0e\x0f\n \x00"<>=/\\~\x80\xa5\xff'),
    st.integers(0x21, 0x7E),
)


@given(raw=st.lists(_ISO2022_JP_ALPHABET, max_size=16).map(bytes), jis=st.booleans())
@example(raw=b'x\x1b(I<a href="/p">', jis=False)  # katakana: Python read ASCII after one error
@example(raw=b"-!\x1b(B\x1b(Bx", jis=True)  # an escape after an escape is an error
@example(raw=b'$"\n$"\x1b(B', jis=True)  # no newline among pairs
@example(raw=b"\x1b$Ax", jis=False)  # an unknown escape: one error, "$Ax" read again
@example(raw=b"-!\x1b(B", jis=True)  # ① (NEC's row 13)
@settings(max_examples=1500, deadline=None)
def test_iso2022_jp_pages_are_read_as_the_encoding_standard_reads_them(raw: bytes, jis: bool) -> None:
    body = (b"\x1b$B" if jis else b"") + raw
    text, charset = decode_html(body, "text/html; charset=iso-2022-jp")
    assert charset.encoding == "iso2022_jp"
    assert text == _standard_iso2022_jp(body)


def test_markup_in_iso2022_jp_katakana_is_no_link() -> None:
    # After ESC ( I, bytes 0x21-0x5F are halfwidth katakana: a browser shows no <a> here.
    body = b'<p>x\x1b(I<a href="/hidden">k</a>\x1b(B<a href="/shown">s</a>'
    out = parse_html(body, "http://e.com/", "text/html; charset=iso-2022-jp")
    assert [link[0] for link in out.links] == ["http://e.com/shown"]


@pytest.mark.parametrize(
    "href, query",
    [
        (b"\x1b$B!A\x1b(B", "%1B$B!A%1B(B"),  # ～ U+FF5E, index jis0208's; Python's codec had no bytes
        (b"\x1b$B-!\x1b(B", "%1B$B-!%1B(B"),  # ①, NEC's row 13
        (b"\x1b(I6\x1b(B", "%1B$B%25+%1B(B"),  # halfwidth ｶ is written as カ
        (b"\x1b(J\\a\\\x1b(B\\", "%1B(J%5Ca%5C%1B(B%5C"),  # ASCII after ¥ stays in Roman, "\" not
        (b"a\x1b$BEl\x1b(Bb", "a%1B$BEl%1B(Bb"),
    ],
)
def test_an_iso2022_jp_pages_link_query_is_written_as_the_encoding_standard_writes_it(href: bytes, query: str) -> None:
    out = parse_html(b'<a href="/p?q=' + href + b'">x</a>', "http://e.com/", "text/html; charset=iso-2022-jp")
    assert out.links[0][0] == "http://e.com/p?q=" + query


@given(
    query=st.text(
        st.sampled_from("ab~\\\u00a5\u203e\u2212\uff76\uff9e\u6771\u4eac\u2460\uff5e\u9ad9\ud55c"),
        min_size=1,
        max_size=8,
    )
)
@settings(max_examples=300, deadline=None)
def test_an_iso2022_jp_query_reads_back_as_written(query: str) -> None:
    # What the encoder writes, the decoder reads as the query (halfwidth katakana as the
    # fullwidth ones, − as －); a character it cannot write is &#N;.
    url = normalize("http://e.com/p?q=" + query, None, "iso2022_jp")
    raw = unquote_to_bytes(url.partition("?q=")[2])
    expected = query.replace("\uff76", "\u30ab").replace("\uff9e", "\u309b").replace("\u2212", "\uff0d")
    expected = expected.replace("\ud55c", "&#54620;")
    assert decode_html(raw, "text/html; charset=iso-2022-jp")[0] == expected


@pytest.fixture(scope="module")
def shift_jis_first_pointers() -> dict[str, int]:
    """Each character's index Shift_JIS pointer: its first pointer in index jis0208, NEC's
    copies of IBM's rows (8272-8835) passed over, and the user-defined area (8836-10715, read
    as private use) none of the index's."""
    first: dict[str, int] = {}
    for pointer in [*range(8272), *range(10716, 11104)]:
        char = _shift_jis_reading(pointer)
        if char != "\ufffd":
            first.setdefault(char, pointer)
    return first


@given(pointer=st.integers(0, 11103), extra=st.sampled_from(["", "\u00a5", "\u203e", "\u00a2", "\ue000", "\uff76"]))
@example(pointer=8619, extra="")  # 髙 at NEC's copy (0xEEE0): written with IBM's 0xFBFC
@example(pointer=8836, extra="")  # 0xF040, user-defined: U+E000, which the encoder cannot write
@settings(max_examples=500, deadline=None)
def test_a_shift_jis_pages_link_query_is_written_as_the_encoding_standard_writes_it(
    pointer: int, extra: str, shift_jis_first_pointers: dict[str, int]
) -> None:
    text = decode_html(b"<p>" + _shift_jis_bytes(pointer), "text/html; charset=shift_jis")[0][3:] + extra
    written = ""
    for char in text:
        if char == "\u00a5" or char == "\u203e":
            written += "%5C" if char == "\u00a5" else "~"
        elif "\uff61" <= char <= "\uff9f":
            written += f"%{ord(char) - 0xFF61 + 0xA1:02X}"
        elif char in shift_jis_first_pointers:
            row, cell = divmod(shift_jis_first_pointers[char], 188)
            lead, trail = row + (0x81 if row < 0x1F else 0xC1), cell + (0x40 if cell < 0x3F else 0x41)
            written += quote(bytes((lead, trail)), safe="!$&()*+,;=:@/?")
        elif char.isascii():
            written += quote(char, safe="!$&()*+,;=:@/?")
        else:
            written += f"%26%23{ord(char)}%3B"
    assert normalize("http://e.com/p?q=" + text, None, "cp932") == "http://e.com/p?q=" + written


@pytest.mark.parametrize("raw", [b"\xfb\xfc", b"\xee\xe0"])  # 髙: IBM's bytes, NEC's copy
def test_a_shift_jis_pages_ibm_kanji_is_written_with_ibms_bytes(raw: bytes) -> None:
    out = parse_html(b'<a href="/p?q=' + raw + b'">x</a>', "http://e.com/", "text/html; charset=shift_jis")
    assert out.links[0][0] == "http://e.com/p?q=%FB%FC"


@given(raw=st.lists(st.integers(0x80, 0xFF), min_size=1, max_size=6).map(bytes))
@example(raw=b"\x80\xff")  # read as windows-1252: € and ÿ
@settings(max_examples=200, deadline=None)
def test_an_x_user_defined_page_reads_its_high_bytes_as_u_f780_on(raw: bytes) -> None:
    chars = "".join(chr(0xF780 + b - 0x80) for b in raw)
    out = parse_html(
        b'<a href="/p' + raw + b"?q=" + raw + b'">' + raw + b"</a>",
        "http://e.com/",
        "text/html; charset=x-user-defined",
    )
    [(url, _, anchor, _, _)] = out.links
    assert anchor == chars
    assert url == "http://e.com/p" + quote(chars.encode()) + "?q=" + "".join(f"%{b:02X}" for b in raw)


def test_a_documents_own_x_user_defined_is_windows_1252() -> None:
    # HTML's prescan: a <meta> naming x-user-defined declares windows-1252 (the header does not).
    assert detect_charset(b"<meta charset=x-user-defined><p>\x80", detect=False) == Charset("cp1252", "meta")
    assert decode_html(b"<p>\x80", "text/html; charset=x-user-defined")[0] == "<p>\uf780"


@pytest.mark.parametrize(
    "label, codec",
    [
        ("unicode", "utf-16-le"),  # the Encoding Standard's labels Python has no alias for
        ("ucs-2", "utf-16-le"),
        ("unicodefffe", "utf-16-be"),
        ("utf-16", "utf-16-le"),
        ("iso88591", "cp1252"),
        ("visual", "iso8859-8"),
        ("koi", "koi8-r"),
        ("mac", "mac-roman"),
        ("cseuckr", "cp949"),
        ("gb_2312-80", "gb18030"),
        ("latin-1", None),  # Python's aliases that name nothing to a browser
        ("utf_8", None),
        ("u8", None),
        ("eucjp", None),
        ("euc_kr", None),
        ("x-mac-japanese", None),
        ("\xa0shift_jis", None),  # only ASCII whitespace is trimmed
        ("\tshift_jis\x0c", "cp932"),
    ],
)
def test_labels_are_the_encoding_standards(label: str, codec: str | None) -> None:
    assert codec_for_label(label) == codec


def test_a_utf_16_label_reads_the_page_as_utf_16le() -> None:
    # charset=unicode (as old Windows tools write it): the page is UTF-16LE, not bytes with NULs.
    body = '<a href="/x">y</a>'.encode("utf-16-le")
    assert parse_html(body, "http://e.com/", "text/html; charset=unicode").links[0][0] == "http://e.com/x"
    # charset=latin-1 names nothing: the page's own <meta> decides.
    assert detect_charset(b'<meta charset="koi8-r"><p>\xc1', "text/html; charset=latin-1").encoding == "koi8-r"


@pytest.mark.parametrize(
    "page, header",
    [
        (b"<p>\x93\xfa", "text/html; charset='shift_jis'"),  # a token with quotes in it: no label
        (b"<meta charset=\"'shift_jis'\"><p>\x93\xfa", None),  # an attribute value with them: none
    ],
)
def test_a_quoted_label_is_no_label(page: bytes, header: str | None) -> None:
    assert detect_charset(page, header, detect=False) == Charset("cp1252", "default")


# Index gb18030 (GB18030-2022) where GB18030-2005, Python's codec, reads private-use characters.
_GB18030_2022 = [
    (b"\xa6\xd9", "\ufe10"),
    (b"\xa6\xda", "\ufe12"),
    (b"\xa6\xdb", "\ufe11"),
    (b"\xa6\xdc", "\ufe13"),
    (b"\xa6\xdf", "\ufe16"),
    (b"\xa6\xec", "\ufe17"),
    (b"\xa6\xf3", "\ufe19"),
    (b"\xfe\x59", "\u9fb4"),
    (b"\xfe\x7e", "\u9fb9"),
    (b"\xfe\xa0", "\u9fbb"),
    (b"\xa8\xbc", "\u1e3f"),
    (b"\x81\x35\xf4\x37", "\ue7c7"),
]


@pytest.mark.parametrize("raw, char", [*_GB18030_2022, (b"\xa3\xa0", "\u3000")])
def test_a_gb18030_page_reads_gb18030_2022s_characters(raw: bytes, char: str) -> None:
    assert decode_html(b"<p>" + raw, "text/html; charset=gb18030")[0] == "<p>" + char


@pytest.mark.parametrize("raw, char", _GB18030_2022)
def test_a_gb18030_pages_link_query_writes_gb18030_2022s_characters_with_its_bytes(raw: bytes, char: str) -> None:
    for href in (raw, f"&#{ord(char)};".encode()):  # the character, as the bytes or a reference
        out = parse_html(b'<a href="/p?q=' + href + b'">x</a>', "http://e.com/", "text/html; charset=gb18030")
        assert out.links[0][0] == "http://e.com/p?q=" + quote(raw, safe="!$&()*+,;=:@/?")


@given(lead=st.integers(0x81, 0xFE), trail=st.integers(0x40, 0xFE).filter(lambda b: b != 0x7F))
@example(lead=0xA3, trail=0xA0)
@settings(max_examples=500, deadline=None)
def test_a_gb18030_pages_two_byte_character_is_written_back_as_its_bytes(lead: int, trail: int) -> None:
    raw = bytes((lead, trail))
    out = parse_html(b'<a href="/p?q=' + raw + b'">x</a>', "http://e.com/", "text/html; charset=gb18030")
    url = out.links[0][0]
    if (lead, trail) == (0xA3, 0xA0):  # U+3000, which the index has at 0xA1A1 first
        raw = b"\xa1\xa1"
    elif decode_html(b"<p>" + raw, "text/html; charset=gb18030")[0][3:] == "\ufffd" + chr(trail) * (trail < 0x80):
        return  # no character: U+FFFD, written as &#65533;
    assert url == "http://e.com/p?q=" + quote(raw, safe="!$&()*+,;=:@/?")


@pytest.fixture(scope="module")
def big5_pointers() -> dict[str, bytes]:
    """What the Big5 encoder writes each character as: its first bytes with a lead byte from
    0xA1 on (the index's rows before are not written), the last for six characters the index
    has twice there."""
    written: dict[str, bytes] = {}
    last = {"\u2550", "\u255e", "\u2561", "\u256a", "\u5341", "\u5345"}
    for lead in range(0xA1, 0xFF):
        for trail in [*range(0x40, 0x7F), *range(0xA1, 0xFF)]:
            raw = bytes((lead, trail))
            text = decode_html(b"<p>" + raw, "text/html; charset=big5")[0][3:]
            if len(text) == 1 and text != "\ufffd" and (text not in written or text in last):
                written[text] = raw
    return written


@given(lead=st.integers(0x81, 0xFE), trail=st.sampled_from([*range(0x40, 0x7F), *range(0xA1, 0xFF)]))
@example(lead=0x88, trail=0x59)  # À, in HKSCS's rows: a browser writes &#192;
@settings(max_examples=500, deadline=None)
def test_a_big5_pages_link_query_is_written_as_the_encoding_standard_writes_it(
    lead: int, trail: int, big5_pointers: dict[str, bytes]
) -> None:
    raw = bytes((lead, trail))
    text = decode_html(b"<p>" + raw, "text/html; charset=big5")[0][3:]
    if len(text) != 1 or text == "\ufffd":
        return  # no one character
    out = parse_html(b'<a href="/p?q=' + raw + b'">x</a>', "http://e.com/", "text/html; charset=big5")
    written = big5_pointers.get(text)
    expected = quote(written, safe="!$&()*+,;=:@/?") if written else f"%26%23{ord(text)}%3B"
    assert out.links[0][0] == "http://e.com/p?q=" + expected


# The encodings of the Encoding Standard, as the codecs decode_html reads them with.
_STANDARD_CODECS = {
    codec_for_label(label)
    for label in (
        "utf-8 ibm866 iso-8859-2 iso-8859-3 iso-8859-4 iso-8859-5 iso-8859-6 iso-8859-7 iso-8859-8 "
        "iso-8859-10 iso-8859-13 iso-8859-14 iso-8859-15 iso-8859-16 koi8-r koi8-u macintosh "
        "windows-874 windows-1250 windows-1251 windows-1252 windows-1253 windows-1254 windows-1255 "
        "windows-1256 windows-1257 windows-1258 x-mac-cyrillic gbk gb18030 big5 euc-jp iso-2022-jp "
        "shift_jis euc-kr"
    ).split()
}


@given(raw=st.lists(st.integers(0x80, 0xFF), min_size=1, max_size=40).map(bytes))
@example(raw=b"\x90\xc1\x9e\xfe\xf3\xf8\xe1\xb5\x98")  # the detector's best: ptcp154
@example(raw=b"\xc9\xb3\xe5\xdb\xad\xb9\xcc\xa4\xd9")  # johab
@example(raw=b"\xf2\x87\xca\xa8\xb3\xde\xe3\xd3\x98")  # mac_iceland
@example(raw=b"\x9d\xf5\xc6\x9b\x8b\xcb\x83\x83\x97\xe9\x9d\x8a\xb0\xbd\xeb\xa9\x9d\xf3\xaa")  # shift_jis_2004
@settings(max_examples=100, deadline=None)
def test_an_undeclared_page_is_read_in_an_encoding_of_the_standard(raw: bytes) -> None:
    # A browser's detector picks among the standard's encodings; so does the crawler's.
    body = b"<html><body><p>" + raw + b'</p><a href="/x">y</a></body></html>'
    assert detect_charset(body).encoding in _STANDARD_CODECS


_BIG5_AS_WINDOWS = [  # index Big5's characters where big5hkscs reads others
    (b"\xa1\x45", "\u2027"),
    (b"\xa1\x4e", "\ufe51"),
    (b"\xa1\xc2", "\u00af"),
    (b"\xa1\xe3", "\uff5e"),
    (b"\xa1\xf2", "\u2295"),
    (b"\xa1\xf3", "\u2299"),
    (b"\xa2\x44", "\uffe5"),
    (b"\xa2\x46", "\uffe0"),
    (b"\xa2\x47", "\uffe1"),
]


@pytest.mark.parametrize("raw, char", _BIG5_AS_WINDOWS)
def test_a_big5_page_reads_index_big5s_characters_and_writes_them_back(raw: bytes, char: str) -> None:
    assert decode_html(b"<p>" + raw, "text/html; charset=big5")[0] == "<p>" + char
    for href in (raw, f"&#{ord(char)};".encode()):
        out = parse_html(b'<a href="/p?q=' + href + b'">x</a>', "http://e.com/", "text/html; charset=big5")
        assert out.links[0][0] == "http://e.com/p?q=" + quote(raw, safe="!$&()*+,;=:@/?")


@pytest.mark.parametrize("trail, char", [(0xC0, "\u2400"), (0xDF, "\u241f"), (0xE0, "\u2421"), (0xE1, "\u20ac")])
def test_a_big5_pages_euro_sign_and_control_pictures_are_read_and_written_back(trail: int, char: str) -> None:
    raw = bytes((0xA3, trail))  # big5hkscs has no character in these cells: they were U+FFFD
    assert decode_html(b"<p>" + raw, "text/html; charset=big5")[0] == "<p>" + char
    out = parse_html(b'<a href="/p?q=' + raw + b'">x</a>', "http://e.com/", "text/html; charset=big5")
    assert out.links[0][0] == "http://e.com/p?q=" + quote(raw, safe="!$&()*+,;=:@/?")
