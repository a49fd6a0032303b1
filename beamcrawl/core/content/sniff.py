"""What a response body is, and how its text is encoded. Pure functions over bytes.

The crawler parses HTML only (and bodies only up to the body cap). Servers label
bodies wrongly often enough that the label alone is not trusted: :func:`sniff` reads the
``Content-Type`` *and* the first bytes, and answers one of ``"html"``, ``"xhtml"``, ``"xml"``
(sitemaps, feeds), ``"text"`` or ``"binary:<kind>"`` with ``kind`` one of :data:`BINARY_KINDS`.

* A label that names a binary type is believed (``image/*``, ``application/pdf``, office
  formats ...): no body that claims to be an image gets parsed as HTML.
* A body whose first bytes are an unmistakable file signature (PNG, JPEG, GIF, WebP, PDF,
  ZIP, gzip, ISO-BMFF video, Matroska/WebM, Ogg, MP3 with ID3, ELF, ...) is binary whatever
  textual label it has: a PNG served as ``text/html`` is still a PNG, and parsing it as HTML
  would only find garbage links.
* Otherwise a known label decides (``text/html`` is HTML, ``text/xml`` is XML, ...).
* With no usable label (missing, ``application/octet-stream``, ``unknown/unknown``) the bytes
  decide, as browsers do (WHATWG MIME Sniffing §7.1): an HTML tag at the start is HTML, weak
  signatures (BMP's ``BM``, an MP3 frame sync, ``MZ``) count, control bytes mean binary.
  ``text/plain`` is never upgraded to HTML (browsers don't either; it would make a plain-text
  file's look-alike links crawlable).

Character encoding, for HTML that is not UTF-8 (:func:`detect_charset`), follows the order of
the WHATWG encoding-sniffing algorithm (HTML §13.2.3.2), with a measured detector before the
last resort:

1. a byte-order mark (it beats the header, as in browsers);
2. the ``charset`` parameter of the HTTP ``Content-Type``;
3. ``<meta charset>`` or ``<meta http-equiv="Content-Type" content="...charset=...">`` in the
   first 4 KiB (browsers look at 1 KiB; real pages put long ``<head>`` matter first), or the
   ``encoding`` of an XML declaration;
4. the body is valid UTF-8 (a character cut by the body cap at the very end is tolerated);
5. charset-normalizer's guess on the first 64 KiB, preferring windows-1252 when that is among
   its candidates, and the best of its guesses that is an encoding of the Encoding Standard;
6. windows-1252.

Step 5 is there because it measured as needed: on undeclared pages in eleven legacy
encodings, a windows-1252 fallback decoded only the two Western European ones correctly, and
charset-normalizer alone got those two wrong (it guessed windows-1250 for French) but the nine
others right (Shift_JIS, EUC-JP, GBK, Big5, EUC-KR, KOI8-R, windows-1251, -1250, ISO-8859-7);
preferring windows-1252 whenever the detector lists it gets all eleven. It costs 0.3–8 ms per
page (5 ms on a 64 KiB prefix), paid only by pages that declare nothing and are not UTF-8.
charset-normalizer is a dependency (setup.py); it is imported when a page first needs it.

Labels are mapped as WHATWG's Encoding Standard maps them: ``iso-8859-1`` and ``us-ascii``
mean windows-1252, ``gb2312`` means GB18030, ``shift_jis`` means Microsoft's cp932, and so on;
labels of non-text codecs (``base64``, ``rot13``) and of UTF-7 are ignored, as browsers do.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import NamedTuple

from beamcrawl.core.content.encodings import REPLACEMENT, X_USER_DEFINED, decode

__all__ = [
    "BINARY_KINDS",
    "Charset",
    "REPLACEMENT",
    "X_USER_DEFINED",
    "codec_for_label",
    "decode_html",
    "detect_charset",
    "magic",
    "meta_tags",
    "media_type",
    "sniff",
]

#: The ``kind`` values of ``"binary:<kind>"``.
BINARY_KINDS = (
    "image",
    "video",
    "audio",
    "pdf",
    "document",
    "archive",
    "executable",
    "font",
    "other",
)

#: Bytes of the body :func:`sniff` needs (more are ignored).
SNIFF_BYTES = 1024
#: Bytes searched for ``<meta charset>``.
META_SCAN_BYTES = 4096
#: Bytes handed to the statistical detector.
DETECT_BYTES = 64 * 1024


# --- file signatures --------------------------------------------------------------------------

# (prefix, format, kind). Strong: unmistakable, they override a textual Content-Type. Each is
# long enough, or holds a byte text never has, that no text or HTML document starts with it
# (so "ID3" needs its version byte, "fLaC" its first block header).
_STRONG: tuple[tuple[bytes, str, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "png", "image"),
    (b"\xff\xd8\xff", "jpeg", "image"),
    (b"GIF87a", "gif", "image"),
    (b"GIF89a", "gif", "image"),
    (b"II*\x00", "tiff", "image"),
    (b"MM\x00*", "tiff", "image"),
    (b"\x00\x00\x00\x0cjP  \r\n\x87\n", "jpeg2000", "image"),
    (b"\xff\x0a", "jpegxl", "image"),
    (b"\x00\x00\x00\x0cJXL \r\n\x87\n", "jpegxl", "image"),
    (b"8BPS\x00\x01", "psd", "image"),
    (b"%PDF-", "pdf", "pdf"),
    (b"%!PS-", "postscript", "document"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "ole2", "document"),  # .doc .xls .ppt .msi
    (b"{\\rtf", "rtf", "document"),
    (b"AT&TFORM", "djvu", "document"),
    (b"PK\x03\x04", "zip", "archive"),  # also docx, xlsx, epub, jar, apk: all zip files
    (b"PK\x05\x06", "zip", "archive"),
    (b"PK\x07\x08", "zip", "archive"),
    (b"\x1f\x8b\x08", "gzip", "archive"),
    (b"\xfd7zXZ\x00", "xz", "archive"),
    (b"7z\xbc\xaf\x27\x1c", "7z", "archive"),
    (b"Rar!\x1a\x07", "rar", "archive"),
    (b"\x28\xb5\x2f\xfd", "zstd", "archive"),
    (b"MSCF\x00\x00\x00\x00", "cab", "archive"),
    (b"\x1a\x45\xdf\xa3", "matroska", "video"),  # also WebM
    (b"FLV\x01", "flv", "video"),
    (b"\x00\x00\x01\xba", "mpeg-ps", "video"),
    (b"\x00\x00\x01\xb3", "mpeg", "video"),
    (b"OggS\x00", "ogg", "audio"),
    (b"ID3\x02", "mp3", "audio"),
    (b"ID3\x03", "mp3", "audio"),
    (b"ID3\x04", "mp3", "audio"),
    (b"fLaC\x00", "flac", "audio"),
    (b"fLaC\x80", "flac", "audio"),
    (b"MThd\x00\x00\x00\x06", "midi", "audio"),
    (b"#!AMR", "amr", "audio"),
    (b"\x7fELF", "elf", "executable"),
    (b"\xfe\xed\xfa\xce", "mach-o", "executable"),
    (b"\xfe\xed\xfa\xcf", "mach-o", "executable"),
    (b"\xce\xfa\xed\xfe", "mach-o", "executable"),
    (b"\xcf\xfa\xed\xfe", "mach-o", "executable"),
    (b"\xca\xfe\xba\xbe", "java-class", "executable"),
    (b"\x00asm", "wasm", "executable"),
    (b"dex\n0", "dex", "executable"),
    (b"wOFF\x00", "woff", "font"),
    (b"wOF2\x00", "woff2", "font"),
    (b"OTTO\x00", "otf", "font"),
    (b"SQLite format 3\x00", "sqlite", "other"),
)
_STRONG_PREFIXES = tuple(prefix for prefix, _, _ in _STRONG)
# Weak: a short or common prefix, believed only when the label does not say what it is.
_WEAK: tuple[tuple[bytes, str, str], ...] = (
    (b"BM", "bmp", "image"),
    (b"\x00\x00\x01\x00", "ico", "image"),
    (b"\x00\x00\x02\x00", "cur", "image"),
    (b"\xff\xfb", "mp3", "audio"),
    (b"\xff\xf3", "mp3", "audio"),
    (b"\xff\xf2", "mp3", "audio"),
    (b"\xff\xf1", "aac", "audio"),
    (b"\xff\xf9", "aac", "audio"),
    (b"MZ", "exe", "executable"),
    (b"\x00\x01\x00\x00\x00", "ttf", "font"),
    (b"true\x00", "ttf", "font"),
    (b"FWS", "swf", "other"),
    (b"CWS", "swf", "other"),
    (b"\x47", "mpeg-ts", "video"),  # checked further below (a sync byte every 188 bytes)
)
_RIFF_KINDS = {b"WEBP": ("webp", "image"), b"WAVE": ("wav", "audio"), b"AVI ": ("avi", "video")}
# ISO base media file format (MP4, MOV, 3GP, HEIF, AVIF): "ftyp" at offset 4, brand after it.
_FTYP_IMAGE_BRANDS = {
    b"avif",
    b"avis",
    b"heic",
    b"heix",
    b"heim",
    b"heis",
    b"hevc",
    b"mif1",
    b"msf1",
}
_FTYP_AUDIO_BRANDS = {b"M4A ", b"M4B ", b"M4P ", b"F4A ", b"F4B "}


def magic(head: bytes, *, weak: bool = False) -> tuple[str, str] | None:
    """The file format a body's first bytes announce, as ``(format, kind)``, or None.

    Args:
        head: The first bytes of the body (a few dozen suffice; 1 KiB for MPEG-TS).
        weak: Also believe short, ambiguous signatures (``BM``, ``MZ``, MP3 frame sync).
    """
    if head.startswith(_STRONG_PREFIXES):  # one C call: most bodies start with none of them
        for prefix, fmt, kind in _STRONG:
            if head.startswith(prefix):
                return fmt, kind
    if head[:3] == b"BZh" and head[3:4].isdigit() and head[4:10] == b"1AY&SY":
        return "bzip2", "archive"  # the block magic (pi in BCD) follows the level digit
    if head[:4] == b"RIFF" and head[8:12] in _RIFF_KINDS:
        return _RIFF_KINDS[head[8:12]]
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in _FTYP_IMAGE_BRANDS:
            return "heif", "image"
        if brand in _FTYP_AUDIO_BRANDS:
            return "m4a", "audio"
        return "mp4", "video"
    if head[:4] in (b"FORM",) and head[8:12] in (b"AIFF", b"AIFC"):
        return "aiff", "audio"
    if weak:
        for prefix, fmt, kind in _WEAK:
            if head.startswith(prefix):
                if fmt == "mpeg-ts":
                    # One sync byte is nothing; a transport stream has one every 188 bytes.
                    if len(head) >= 3 * 188 and head[188] == 0x47 and head[376] == 0x47:
                        return fmt, kind
                    continue
                return fmt, kind
    return None


# --- labels -----------------------------------------------------------------------------------

_UNKNOWN_TYPES = frozenset(
    {
        "",
        "unknown/unknown",
        "application/unknown",
        "*/*",
        "application/octet-stream",
        "binary/octet-stream",
        "application/x-unknown",
        "content/unknown",
        "application/binary",
    }
)
_XML_TYPES = frozenset({"text/xml", "application/xml", "application/x-xml"})
_TEXT_APPLICATION = frozenset(
    {
        "application/json",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/ld+json",
        "application/x-www-form-urlencoded",
        "application/x-sh",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/sql",
        "application/graphql",
    }
)
_ARCHIVE_TYPES = frozenset(
    {
        "application/zip",
        "application/gzip",
        "application/x-gzip",
        "application/x-tar",
        "application/x-bzip2",
        "application/x-xz",
        "application/x-7z-compressed",
        "application/x-rar-compressed",
        "application/vnd.rar",
        "application/zstd",
        "application/x-compress",
        "application/x-iso9660-image",
        "application/x-apple-diskimage",
        "application/x-zip-compressed",
        "application/x-gtar",
    }
)
_EXECUTABLE_TYPES = frozenset(
    {
        "application/x-msdownload",
        "application/x-executable",
        "application/x-msdos-program",
        "application/x-msi",
        "application/vnd.microsoft.portable-executable",
        "application/vnd.android.package-archive",
        "application/java-archive",
        "application/x-java-archive",
        "application/x-sharedlib",
        "application/wasm",
        "application/x-debian-package",
        "application/x-rpm",
        "application/x-apple-diskimage",
        "application/x-mach-binary",
    }
)
_DOCUMENT_PREFIXES = (
    "application/msword",
    "application/vnd.ms-",
    "application/vnd.openxmlformats-officedocument",
    "application/vnd.oasis.opendocument",
    "application/rtf",
    "application/epub+zip",
    "application/postscript",
    "application/vnd.apple.",
    "application/x-mobipocket",
    "image/vnd.djvu",
    "application/oxps",
)
_FONT_PREFIXES = (
    "font/",
    "application/font-",
    "application/x-font-",
    "application/vnd.ms-fontobject",
)


def media_type(content_type: str | None) -> str:
    """The ``type/subtype`` of a Content-Type value, lower case, without parameters."""
    if not content_type:
        return ""
    return content_type.split(";", 1)[0].strip().lower()


def _kind_of_label(essence: str) -> str | None:
    """What a known media type says the body is; None for an unknown or unusable label."""
    if essence in _UNKNOWN_TYPES:
        return None
    if essence == "text/html":
        return "html"
    if essence == "application/xhtml+xml":
        return "xhtml"
    if essence.startswith(_DOCUMENT_PREFIXES):
        return "binary:document"
    if essence.startswith(_FONT_PREFIXES):
        return "binary:font"
    major = essence.partition("/")[0]
    if major in ("image", "video", "audio"):
        return f"binary:{major}"
    if essence == "application/pdf" or essence == "application/x-pdf":
        return "binary:pdf"
    if essence in _XML_TYPES or essence.endswith("+xml"):
        return "xml"
    if major == "text" or essence in _TEXT_APPLICATION or essence.endswith("+json"):
        return "text"
    if essence in _ARCHIVE_TYPES:
        return "binary:archive"
    if essence in _EXECUTABLE_TYPES:
        return "binary:executable"
    if major in ("application", "model", "chemical", "x-world", "multipart"):
        return "binary:other"
    return None  # a made-up major type ("foo/bar", "html"): let the bytes decide


# WHATWG MIME Sniffing §7.1, "identify an unknown MIME type": these tags, after whitespace,
# followed by a space or ">" (the comment opener by anything).
_HTML_START = re.compile(
    rb"(?:<!doctype\s+html|<html|<head|<script|<iframe|<h1|<div|<font|<table|<a|<style|<title|<b|<body|<br|<p)"
    rb"(?=[\s>])|<!--",
    re.IGNORECASE,
)
_XML_DECL = re.compile(rb"<\?xml[\s?]")
_LEADING_WS = b" \t\n\r\x0c"
# WHATWG's "binary data byte": control characters that text does not contain.
_BINARY_BYTES = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")
_BOMS = (b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe")


def sniff(content_type: str | None, head: bytes) -> str:
    """What a body is: ``"html"``, ``"xhtml"``, ``"xml"``, ``"text"`` or ``"binary:<kind>"``.

    Args:
        content_type: The response's Content-Type header (any case, parameters allowed), or
            None when there was none.
        head: The first bytes of the (content-decoded) body; :data:`SNIFF_BYTES` are enough.
    """
    head = head[:SNIFF_BYTES]
    declared = _kind_of_label(media_type(content_type))
    if declared is not None and declared.startswith("binary:"):
        return declared  # a binary label is kept: it is more specific (a .docx is a zip file)
    strong = magic(head)
    if strong is not None:
        return f"binary:{strong[1]}"
    if declared is not None:
        return declared
    # No usable label: the bytes decide.
    weak = magic(head, weak=True)
    if weak is not None:
        return f"binary:{weak[1]}"
    bom = head.startswith(_BOMS)
    text = head
    for mark in _BOMS:
        if text.startswith(mark):
            text = text[len(mark) :]
            break
    if head.startswith((b"\xfe\xff", b"\xff\xfe")):
        # UTF-16: look at it as ASCII by dropping the zero bytes of the ASCII characters.
        text = text.replace(b"\x00", b"")
    stripped = text.lstrip(_LEADING_WS)
    if _XML_DECL.match(stripped):
        return "xhtml" if re.search(rb"<html[\s>]", stripped, re.IGNORECASE) else "xml"
    if _HTML_START.match(stripped):
        return "html"
    if stripped[:5].lower() in (b"<rss ", b"<rss>", b"<feed"):
        return "xml"
    if not bom and _BINARY_BYTES.search(head):
        return "binary:other"
    return "text"


# --- character encodings ----------------------------------------------------------------------


class Charset(NamedTuple):
    """A body's character encoding and how it was found.

    Attributes:
        encoding: A Python codec name, ready for ``bytes.decode``, or :data:`REPLACEMENT` or
            :data:`X_USER_DEFINED`, which no codec reads (:func:`decode_html` reads them).
        source: ``"bom"``, ``"header"``, ``"meta"`` (also an XML declaration), ``"utf-8"``
            (valid UTF-8), ``"detected"`` (statistical guess) or ``"default"`` (windows-1252).
    """

    encoding: str
    source: str


# The Encoding Standard's labels, by the codec that reads the encoding they name; no other
# label names an encoding (Python's aliases "latin-1", "eucjp", "utf_8", "u8" are none to a
# browser). The replacement encoding's read a document as one U+FFFD (these encodings let text
# hide markup from a reader that does not know them).
_STANDARD_LABELS = (
    ("utf-8", "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8"),
    ("cp866", "866 cp866 csibm866 ibm866"),
    ("iso8859-2", "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2"),
    ("iso8859-3", "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3"),
    ("iso8859-4", "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4"),
    ("iso8859-5", "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 iso_8859-5:1988"),
    (
        "iso8859-6",
        "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987",
    ),
    (
        "iso8859-7",
        "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek",
    ),
    (
        "iso8859-8",
        "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 iso88598 iso_8859-8 iso_8859-8:1988 visual",
    ),
    ("iso8859-8", "csiso88598i iso-8859-8-i logical"),
    ("iso8859-10", "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6"),
    ("iso8859-13", "iso-8859-13 iso8859-13 iso885913"),
    ("iso8859-14", "iso-8859-14 iso8859-14 iso885914"),
    ("iso8859-15", "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9"),
    ("iso8859-16", "iso-8859-16"),
    ("koi8-r", "cskoi8r koi koi8 koi8-r koi8_r"),
    ("koi8-u", "koi8-ru koi8-u"),
    ("mac-roman", "csmacintosh mac macintosh x-mac-roman"),
    ("cp874", "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874"),
    ("cp1250", "cp1250 windows-1250 x-cp1250"),
    ("cp1251", "cp1251 windows-1251 x-cp1251"),
    (
        "cp1252",
        "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252",
    ),
    ("cp1253", "cp1253 windows-1253 x-cp1253"),
    (
        "cp1254",
        "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254",
    ),
    ("cp1255", "cp1255 windows-1255 x-cp1255"),
    ("cp1256", "cp1256 windows-1256 x-cp1256"),
    ("cp1257", "cp1257 windows-1257 x-cp1257"),
    ("cp1258", "cp1258 windows-1258 x-cp1258"),
    ("mac-cyrillic", "x-mac-cyrillic x-mac-ukrainian"),
    ("gb18030", "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk"),
    ("gb18030", "gb18030"),
    ("big5hkscs", "big5 big5-hkscs cn-big5 csbig5 x-x-big5"),
    ("euc_jp", "cseucpkdfmtjapanese euc-jp x-euc-jp"),
    ("iso2022_jp", "csiso2022jp iso-2022-jp"),
    ("cp932", "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis"),
    (
        "cp949",
        "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 ksc5601 ksc_5601 windows-949",
    ),
    (REPLACEMENT, "csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr replacement"),
    ("utf-16-be", "unicodefffe utf-16be"),
    ("utf-16-le", "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le"),
    (X_USER_DEFINED, "x-user-defined"),
)
_LABELS = {label: codec for codec, labels in _STANDARD_LABELS for label in labels.split()}
# Python codec name (codecs.lookup(...).name) -> the codec WHATWG's decoder corresponds to: what
# the detector's guesses, which are Python's names, are read with.
_CODECS = {
    "utf-8": "utf-8",
    "utf-16": "utf-16",
    "utf-16-le": "utf-16-le",
    "utf-16-be": "utf-16-be",
    "ascii": "cp1252",
    "iso8859-1": "cp1252",
    "latin-1": "cp1252",
    "cp1252": "cp1252",
    "iso8859-9": "cp1254",
    "cp1254": "cp1254",
    "iso8859-2": "iso8859-2",
    "iso8859-3": "iso8859-3",
    "iso8859-4": "iso8859-4",
    "iso8859-5": "iso8859-5",
    "iso8859-6": "iso8859-6",
    "iso8859-7": "iso8859-7",
    "iso8859-8": "iso8859-8",
    "iso8859-10": "iso8859-10",
    "iso8859-13": "iso8859-13",
    "iso8859-14": "iso8859-14",
    "iso8859-15": "iso8859-15",
    "iso8859-16": "iso8859-16",
    "cp866": "cp866",
    "koi8-r": "koi8-r",
    "koi8-u": "koi8-u",
    "mac-roman": "mac-roman",
    "mac-cyrillic": "mac-cyrillic",
    "cp874": "cp874",
    "tis-620": "cp874",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1253": "cp1253",
    "cp1255": "cp1255",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp1258": "cp1258",
    "gbk": "gb18030",
    "gb2312": "gb18030",
    "gb18030": "gb18030",
    "big5": "big5hkscs",
    "big5hkscs": "big5hkscs",
    "cp950": "big5hkscs",
    "euc_jp": "euc_jp",
    "euc_jis_2004": "euc_jp",
    "euc_jisx0213": "euc_jp",
    "shift_jis_2004": "cp932",
    "shift_jisx0213": "cp932",
    "iso2022_jp": "iso2022_jp",
    "shift_jis": "cp932",
    "cp932": "cp932",
    "euc_kr": "cp949",
    "cp949": "cp949",
}


_ASCII_WHITESPACE = "\t\n\x0c\r "


def _python_codec(name: str) -> str | None:
    """The codec for a Python codec name or alias (the detector's guesses), or None."""
    try:
        return _CODECS.get(codecs.lookup(name).name)
    except (LookupError, ValueError):
        return None


def codec_for_label(label: str | None, *, in_document: bool = False) -> str | None:
    """The Python codec for an encoding label, as the WHATWG Encoding Standard reads labels.

    Args:
        label: The label as written (``"ISO-8859-1"``, ``"utf8"``, ``" Shift_JIS "``).
        in_document: The label came from the document itself (meta or XML declaration): a
            UTF-16 label there means UTF-8, since the bytes that spelled it were ASCII, and
            x-user-defined windows-1252.

    Returns:
        A codec name, :data:`REPLACEMENT` for the labels of the replacement encoding
        (``iso-2022-kr``, ``hz-gb-2312`` ...), or None for an unknown label, a non-text codec
        or UTF-7.
    """
    if not label:
        return None
    name = label.strip(_ASCII_WHITESPACE).lower()
    codec = _LABELS.get(name)
    if codec is None:
        return None
    if in_document and codec.startswith("utf-16"):
        return "utf-8"
    if in_document and codec == X_USER_DEFINED:
        return "cp1252"  # HTML's prescan reads a document's own x-user-defined as windows-1252
    return codec


_HTTP_SPACE = " \t\n\r"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_QUOTED_STRING_TEXT = re.compile(r"[\t\x20-\x7e\x80-\xff]*")


def _quoted_string(value: str, pos: int) -> tuple[str, int]:
    """An HTTP quoted-string that opens at ``value[pos]``, unescaped, and where it ends (an
    unclosed one runs to the end, a backslash keeps the character after it)."""
    out = []
    pos += 1
    while pos < len(value):
        end = min((i for i in (value.find('"', pos), value.find("\\", pos)) if i >= 0), default=len(value))
        out.append(value[pos:end])
        if end >= len(value):
            return "".join(out), end
        pos = end + 1
        if value[end] == '"':
            return "".join(out), pos
        if pos >= len(value):
            out.append("\\")
            return "".join(out), pos
        out.append(value[pos])
        pos += 1
    return "".join(out), pos


def _mime_type(value: str) -> tuple[str, dict[str, str]] | None:
    """A MIME type's essence and parameters as the MIME Sniffing standard parses one (the
    first of a name counts; a name or value outside the grammar is passed over), or None."""
    value = value.strip(_HTTP_SPACE)
    slash = value.find("/")
    if slash < 0:
        return None
    semicolon = value.find(";", slash)
    end = len(value) if semicolon < 0 else semicolon
    kind, subtype = value[:slash], value[slash + 1 : end].rstrip(_HTTP_SPACE)
    if not _TOKEN.fullmatch(kind) or not _TOKEN.fullmatch(subtype):
        return None
    params: dict[str, str] = {}
    pos = end
    while pos < len(value):
        pos += 1  # the ";"
        while pos < len(value) and value[pos] in _HTTP_SPACE:
            pos += 1
        stop = pos
        while stop < len(value) and value[stop] not in ";=":
            stop += 1
        name, pos = value[pos:stop].lower(), stop
        if pos >= len(value):
            break
        if value[pos] == ";":
            continue
        pos += 1  # the "="
        if pos >= len(value):
            break
        if value[pos] == '"':
            param, pos = _quoted_string(value, pos)
            semicolon = value.find(";", pos)
            pos = len(value) if semicolon < 0 else semicolon
        else:
            semicolon = value.find(";", pos)
            stop = len(value) if semicolon < 0 else semicolon
            param, pos = value[pos:stop].rstrip(_HTTP_SPACE), stop
            if not param:
                continue
        if name and _TOKEN.fullmatch(name) and _QUOTED_STRING_TEXT.fullmatch(param) and name not in params:
            params[name] = param
    return f"{kind}/{subtype}".lower(), params


def _header_charset(content_type: str) -> str | None:
    """:func:`_parse_header_charset`, remembered for the short values most pages share
    (``text/html; charset=utf-8``: 3 µs a page parsed each time)."""
    if len(content_type) <= _REMEMBERED_TYPE_CHARS:
        return _remembered_header_charset(content_type)
    return _parse_header_charset(content_type)


_REMEMBERED_TYPE_CHARS = 128


@lru_cache(maxsize=256)
def _remembered_header_charset(content_type: str) -> str | None:
    return _parse_header_charset(content_type)


def _parse_header_charset(content_type: str) -> str | None:
    """The ``charset`` a Content-Type header gives, as Fetch's "extract a MIME type" reads it:
    its values split at the commas outside quoted strings, each parsed as a MIME type; the
    last that parses decides, keeping the charset of one before it of the same essence."""
    values = []
    current: list[str] = []
    pos = 0
    while True:
        stop = pos
        while stop < len(content_type) and content_type[stop] not in '",':
            stop += 1
        current.append(content_type[pos:stop])
        pos = stop
        if pos < len(content_type) and content_type[pos] == '"':
            _, end = _quoted_string(content_type, pos)
            current.append(content_type[pos:end])
            pos = end
            if pos < len(content_type):
                continue
        values.append("".join(current).strip(" \t"))
        current = []
        if pos >= len(content_type):
            break
        pos += 1  # the ","
    charset: str | None = None
    essence: str | None = None
    found: str | None = None
    for value in values:
        parsed = _mime_type(value)
        if parsed is None or parsed[0] == "*/*":
            continue
        kind, params = parsed
        if kind != essence:  # another type: what an earlier one said of its charset is void
            charset, essence = params.get("charset"), kind
        found = params.get("charset", charset)
    return found


_XML_ENCODING = re.compile(rb"""^<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._\-]+)["']""")
_PRESCAN_SPACE = b"\t\n\x0c\r "
_TAG_NAME_END = re.compile(rb"[\t\n\x0c\r >]")
_RAN_OUT = (b"", b"", -1)
_BEFORE_ATTRIBUTE = re.compile(rb"[\t\n\x0c\r /]*")
_NAME_REST = re.compile(rb"[^\t\n\x0c\r /=>]*")
_SPACES = re.compile(rb"[\t\n\x0c\r ]*")
_UNQUOTED = re.compile(rb"[^\t\n\x0c\r >]*")
_META_START = re.compile(rb"<[mM][eE][tT][aA][\t\n\x0c\r /]")


def _past(pattern: re.Pattern[bytes], head: bytes, pos: int) -> int:
    """Where ``pattern`` (a run that may be empty) stops matching from ``pos``."""
    found = pattern.match(head, pos)
    return found.end() if found is not None else pos


def _attribute(head: bytes, pos: int) -> tuple[bytes, bytes, int] | None:
    """HTML's "get an attribute" (§13.2.3.2, the prescan's reading of a tag): the next
    attribute's name and value (ASCII lower-cased) and the position after it; None at the
    tag's ``>``, :data:`_RAN_OUT` (position -1) where the bytes run out first."""
    n = len(head)
    pos = _past(_BEFORE_ATTRIBUTE, head, pos)
    if pos >= n:
        return _RAN_OUT
    if head[pos] == 0x3E:
        return None
    end = _past(_NAME_REST, head, pos + 1)  # a first "=" is the name's
    name = head[pos:end].lower()
    pos = _past(_SPACES, head, end)
    if pos >= n:
        return _RAN_OUT
    if head[pos] != 0x3D:  # no "=": no value
        return name, b"", pos
    pos = _past(_SPACES, head, pos + 1)
    if pos >= n:
        return _RAN_OUT
    c = head[pos]
    if c in b"\"'":
        close = head.find(head[pos : pos + 1], pos + 1)
        if close < 0:
            return _RAN_OUT
        return name, head[pos + 1 : close].lower(), close + 1
    if c == 0x3E:
        return name, b"", pos
    end = _past(_UNQUOTED, head, pos)
    if end >= n:
        return _RAN_OUT
    return name, head[pos:end].lower(), end


def _content_charset(content: bytes) -> bytes | None:
    """HTML's "extracting a character encoding from a meta element": the label in a
    ``content`` attribute's ``charset=``, or None."""
    pos = 0
    n = len(content)
    while True:
        at = content.find(b"charset", pos)
        if at < 0:
            return None
        pos = at + 7
        while pos < n and content[pos] in _PRESCAN_SPACE:
            pos += 1
        if pos >= n or content[pos] != 0x3D:
            continue
        pos += 1
        while pos < n and content[pos] in _PRESCAN_SPACE:
            pos += 1
        if pos >= n:
            return None
        if content[pos] in b"\"'":
            close = content.find(content[pos : pos + 1], pos + 1)
            return content[pos + 1 : close] if close >= 0 else None
        end = pos
        while end < n and content[end] not in b"\t\n\x0c\r ;":
            end += 1
        return content[pos:end]


def meta_tags(data: bytes) -> Iterator[dict[bytes, bytes]]:
    """Each ``<meta>`` tag's attributes wherever it stands in ``data``, read as HTML's
    prescan reads a tag (the first of each name; names and values ASCII lower-cased). Unlike
    the prescan it does not skip comments or other tags' attribute values: where it serves, a
    directive found in error only asks the crawler to do less. Linear in ``data``."""
    pos = 0
    while (start := _META_START.search(data, pos)) is not None:
        pos = start.end() - 1  # a tag is read once: the next is looked for after its end
        attrs: dict[bytes, bytes] = {}
        while (found := _attribute(data, pos)) is not None:
            name, value, pos = found
            if pos < 0:
                return  # the bytes ran out inside the tag
            attrs.setdefault(name, value)
        yield attrs


def _meta_codec(head: bytes) -> str | None:
    """The codec a document declares in its first bytes: an XML declaration's encoding, or
    what HTML's prescan (§13.2.3.2, "prescan a byte stream to determine its encoding") finds
    in its ``<meta>`` tags, read as the tokenizer reads them (comments, quoted attribute
    values and other tags skipped; a label no encoding has passed over for the next)."""
    xml = _XML_ENCODING.match(head)
    if xml:
        return codec_for_label(xml.group(1).decode("ascii"), in_document=True)
    metas = [m.start() for m in _META_START.finditer(head)]
    if not metas:
        return None  # no <meta> tag: nothing for the prescan to find
    n = metas[-1] + 1  # nothing to find past the last "<meta"
    pos = head.find(b"<")
    while 0 <= pos < n:
        if head.startswith(b"<!--", pos):
            # Ends at the first ">" after two "-", which may be the comment opener's own.
            end = head.find(b"-->", pos + 2)
            if end < 0:
                return None
            pos = end + 2
        elif head[pos + 1 : pos + 5].lower() == b"meta" and head[pos + 5 : pos + 6] in (
            b"\t",
            b"\n",
            b"\x0c",
            b"\r",
            b" ",
            b"/",
        ):
            pos += 5
            names: set[bytes] = set()
            got_pragma = False
            need_pragma: bool | None = None
            charset: str | None = None
            failed = False
            while (found := _attribute(head, pos)) is not None:
                name, value, pos = found
                if pos < 0:
                    return None  # the bytes ran out inside the tag
                if name in names:
                    continue
                names.add(name)
                if name == b"http-equiv":
                    got_pragma = got_pragma or value == b"content-type"
                elif name == b"content":
                    label = _content_charset(value)
                    codec = codec_for_label(label.decode("latin-1"), in_document=True) if label is not None else None
                    if codec is not None and charset is None and not failed:
                        charset = codec
                        need_pragma = True
                elif name == b"charset":
                    charset = codec_for_label(value.decode("latin-1"), in_document=True)
                    failed = charset is None
                    need_pragma = False
            if charset is not None and (need_pragma is False or (need_pragma and got_pragma)):
                return charset
        elif head[pos + 1 : pos + 2].isalpha() or (
            head[pos + 1 : pos + 2] == b"/" and head[pos + 2 : pos + 3].isalpha()
        ):
            name_end = _TAG_NAME_END.search(head, pos)
            if name_end is None:
                return None
            pos = name_end.start()
            while (found := _attribute(head, pos)) is not None:
                pos = found[2]
                if pos < 0:
                    return None
        elif head[pos + 1 : pos + 2] in (b"!", b"/", b"?"):
            pos = head.find(b">", pos)
            if pos < 0:
                return None
        pos = head.find(b"<", pos + 1)
    return None


def _is_utf8(body: bytes) -> bool:
    """Valid UTF-8, allowing one character cut off at the very end (a capped body)."""
    try:
        body.decode("utf-8")
        return True
    except UnicodeDecodeError as exc:
        # "unexpected end of data" at most 3 bytes before the end: a truncated last character.
        return exc.end == len(body) and len(body) - exc.start <= 3 and exc.reason == "unexpected end of data"


def _detect(body: bytes) -> str | None:
    import charset_normalizer  # imported on first need: ~50 ms, and most pages never need it

    try:
        matches = charset_normalizer.from_bytes(body[:DETECT_BYTES])
    except Exception:  # a detector bug must not fail a page: fall back to the default
        return None
    best = matches.best()
    if best is None:
        return None
    candidates = {m.encoding for m in matches}
    for m in matches:
        candidates.update(m.could_be_from_charset)
    if "cp1252" in candidates:
        return "cp1252"  # the most common legacy encoding, and WHATWG's default
    # The best guess that is an encoding of the standard's: a browser reads a page with no
    # other (shift_jis_2004 is Shift_JIS to it; johab, ptcp154, mac_iceland, cp855 are none).
    for m in matches:
        for name in (m.encoding, *m.could_be_from_charset):
            codec = _python_codec(name)
            if codec is not None:
                return codec
    return None


def detect_charset(body: bytes, content_type: str | None = None, *, detect: bool = True) -> Charset:
    """The encoding to decode an HTML (or XML) body with; see the module docstring for the order.

    Args:
        body: The content-decoded body (all of it: validity is checked over the whole).
        content_type: The response's Content-Type header, if any.
        detect: Allow the statistical detector (step 5); off, step 6 follows step 4.
    """
    if body.startswith(b"\xef\xbb\xbf"):
        return Charset("utf-8-sig", "bom")
    if body.startswith((b"\xfe\xff", b"\xff\xfe")):
        return Charset("utf-16", "bom")
    if content_type:
        label = _header_charset(content_type)
        codec = codec_for_label(label) if label is not None else None
        if codec is not None:
            return Charset(codec, "header")
    codec = _meta_codec(body[:META_SCAN_BYTES])
    if codec is not None:
        return Charset(codec, "meta")
    if _is_utf8(body):
        return Charset("utf-8", "utf-8")
    if detect:
        guess = _detect(body)
        if guess is not None:
            try:
                codecs.lookup(guess)
                return Charset(guess, "detected")
            except LookupError:
                pass
    return Charset("cp1252", "default")


def decode_html(body: bytes, content_type: str | None = None, *, detect: bool = True) -> tuple[str, Charset]:
    """Decodes an HTML body to text with :func:`detect_charset`, as the Encoding Standard
    reads its bytes (:func:`beamcrawl.core.content.encodings.decode`); bad bytes become
    U+FFFD.

    Never raises: a codec that fails on its own terms falls back to windows-1252.
    """
    charset = detect_charset(body, content_type, detect=detect)
    try:
        return decode(body, charset.encoding), charset
    except (LookupError, ValueError):  # pragma: no cover - every codec above is a text codec
        fallback = Charset("cp1252", "default")
        return body.decode(fallback.encoding, errors="replace"), fallback
