"""The Encoding Standard's decoders and encoders, where Python's codecs read or write
otherwise (pure functions over bytes and text).

A page's links are resolved from its decoded text, and a link's query is written back in the
page's encoding: a page read otherwise than a browser reads it makes the crawler fetch URLs
the page does not name. :func:`decode` reads a document in a codec that
:func:`beamcrawl.core.content.sniff.detect_charset` chose as the WHATWG Encoding Standard's
decoder for that encoding reads it:

- single-byte encodings by the standard's indexes (:func:`single_byte_table`), where
  Python's code pages leave bytes unassigned or read them as other characters, and
  x-user-defined, which no Python codec reads;
- multi-byte encodings (Shift_JIS, EUC-JP, EUC-KR, Big5, gb18030) by Python's codecs, their
  errors as the standard consumes them (:func:`_standard_error`) and the cells the standard's
  indexes read otherwise replaced (:data:`_READ_OTHERWISE`);
- ISO-2022-JP by the standard's state machine where Python's codec would read otherwise
  (:func:`_iso2022_jp`);
- the replacement encoding's documents as one U+FFFD.

The encoders (:func:`single_byte_index`, :func:`shift_jis_encoded`, :func:`euc_jp_encoded`,
:func:`iso2022_jp_encoded`, :func:`gb18030_encoded`, :func:`big5_encoded`) write a link's
query as the standard's encoders write it (``core/urls/urlnorm.py``).
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from functools import lru_cache

__all__ = [
    "REPLACEMENT",
    "X_USER_DEFINED",
    "big5_encoded",
    "decode",
    "euc_jp_encoded",
    "gb18030_encoded",
    "iso2022_jp_encoded",
    "shift_jis_encoded",
    "single_byte_index",
    "single_byte_table",
]

#: The ``encoding`` of a document the Encoding Standard reads as one U+FFFD (no codec).
REPLACEMENT = "replacement"
#: The ``encoding`` of x-user-defined, which reads bytes 0x80-0xFF as U+F780-U+F7FF (no Python
#: codec: :func:`single_byte_table` reads it).
X_USER_DEFINED = "x-user-defined"


# Where Python's single-byte codecs read a byte otherwise than the Encoding Standard's index
# for the encoding (what a browser reads the page as): the windows code pages leave bytes
# 0x80-0x9F unassigned that the standard reads as the C1 control of that value (windows-1252's
# 0x81, 0x8D, 0x8F, 0x90, 0x9D), windows-1255 has U+05BA at 0xCA, and KOI8-U is the standard's
# KOI8-RU (0xAE, 0xBE are ў and Ў, not box drawings).
_C1_UNASSIGNED = frozenset(
    {"cp874", "cp1250", "cp1251", "cp1252", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257", "cp1258"}
)
_INDEX_BYTES = {"cp1255": {0xCA: "\u05ba"}, "koi8-u": {0xAE: "\u045e", 0xBE: "\u040e"}}


@lru_cache(maxsize=64)
def single_byte_table(encoding: str) -> str | None:
    """The 256 characters the Encoding Standard reads the bytes 0x00-0xFF as, U+FFFE for a
    byte it reads as an error, for a Python codec whose own reading differs from it; None
    for any other codec (the codec's reading is the standard's); x-user-defined's too."""
    if encoding == X_USER_DEFINED:
        return "".join(chr(byte if byte < 0x80 else 0xF780 + byte - 0x80) for byte in range(256))
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        return None
    if name not in _C1_UNASSIGNED and name not in _INDEX_BYTES:
        return None
    chars = []
    for byte in range(256):
        try:
            char = bytes([byte]).decode(name)
        except UnicodeDecodeError:
            char = chr(byte) if name in _C1_UNASSIGNED and 0x80 <= byte <= 0x9F else "\ufffe"
        chars.append(_INDEX_BYTES.get(name, {}).get(byte, char))
    return "".join(chars)


@lru_cache(maxsize=64)
def single_byte_index(encoding: str) -> dict[str, int] | None:
    """The byte the Encoding Standard's encoder writes for each character (the first byte
    :func:`single_byte_table` reads it from), for the codecs that function answers; None
    for any other."""
    table = single_byte_table(encoding)
    if table is None:
        return None
    index: dict[str, int] = {}
    for byte, char in enumerate(table):
        if char != "\ufffe":
            index.setdefault(char, byte)
    return index


# The Encoding Standard's multi-byte decoders, where Python's codec for the encoding errs: the
# byte that starts the error is always consumed; a lead byte's next byte too, unless it is an
# ASCII byte (it is read again, as itself: "<", '"', a letter of an href) or the bytes run out.
# A gb18030 lead and digit await two more bytes, and if the third is no lead or the fourth no
# digit only the lead is consumed. A lone gb18030 0x80 is the euro sign. Python's codecs
# consume one byte and read the next as a lead, which takes the ASCII byte after it: Shift_JIS
# b"\xef\x87mail" was an error and U+334A then "ail", EUC-KR b"\xd4\x85Z" and Big5
# b"\x84\xfeO" likewise; at the end of the bytes gb18030 took b"\xff3" as one error and EUC-JP
# b"\x8fJ" (the "3" and "J" lost). Only errors pay for this (a Python call each).
_LEADS = {
    "cp932": frozenset([*range(0x81, 0xA0), *range(0xE0, 0xFD)]),
    "euc_jp": frozenset([0x8E, 0x8F, *range(0xA1, 0xFF)]),
    "big5hkscs": frozenset(range(0x81, 0xFF)),
    "gb18030": frozenset(range(0x81, 0xFF)),
    "gbk": frozenset(range(0x81, 0xFF)),  # gb18030 pages are read with gbk (see _multi_byte)
    "cp949": frozenset(range(0x81, 0xFF)),
}
_STANDARD_ERRORS = "beamcrawl-encoding-standard"


def _standard_error(exc: UnicodeError) -> tuple[str, int]:
    """The codec error handler :func:`decode_html` gives the codecs in :data:`_LEADS`: one
    U+FFFD for what the Encoding Standard's decoder reads as one error, decoding going on
    where that decoder goes on."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    data, start = exc.object, exc.start
    leads = _LEADS.get(exc.encoding)
    if leads is None:
        return "\ufffd", exc.end
    n = len(data)
    first = data[start]
    chinese = exc.encoding == "gbk" or exc.encoding == "gb18030"
    if first not in leads:
        return ("\u20ac" if first == 0x80 and chinese else "\ufffd"), start + 1
    if start + 1 >= n:
        return "\ufffd", n
    second = data[start + 1]
    if chinese and 0x30 <= second <= 0x39:
        if start + 2 >= n:
            return "\ufffd", n
        if not 0x81 <= data[start + 2] <= 0xFE:
            return "\ufffd", start + 1
        if start + 3 >= n:
            return "\ufffd", n
        if not 0x30 <= data[start + 3] <= 0x39:
            return "\ufffd", start + 1
        return _gb18030_unit(bytes(data[start : start + 4])) or "\ufffd", start + 4
    if chinese and (char := _gb18030_unit(bytes(data[start : start + 2]))) is not None:
        return char, start + 2
    if exc.encoding == "euc_jp" and first == 0x8F and 0xA1 <= second <= 0xFE:
        if start + 2 >= n:
            return "\ufffd", n
        return "\ufffd", start + 2 if data[start + 2] < 0x80 else start + 3
    if exc.encoding == "euc_jp" and first >= 0xA1 and 0xA1 <= second <= 0xFE:
        char = _jis0208((first - 0xA1) * 94 + second - 0xA1)
        if char is not None:
            return char, start + 2
    if exc.encoding == "big5hkscs" and first == 0xA3 and 0xC0 <= second <= 0xE1:
        return _big5_a3(second), start + 2
    return "\ufffd", start + 1 if second < 0x80 else start + 2


def _big5_a3(second: int) -> str:
    """Index Big5's cells 0xA3C0-0xA3E1, which big5hkscs has not: the control pictures
    U+2400-U+241F and U+2421, and the euro sign."""
    return chr(0x2400 + second - 0xC0) if second < 0xE0 else "\u2421" if second == 0xE0 else "\u20ac"


@lru_cache(maxsize=1 << 16)  # an error costs a lookup, not a decode and an exception
def _gb18030_unit(unit: bytes) -> str | None:
    """The character index gb18030 (or its ranges) reads ``unit`` as, or None: Python's gb18030,
    GB18030-2005, but for what GB18030-2022 changed (:data:`_GB18030_2022`)."""
    try:
        char = unit.decode("gb18030")
    except UnicodeDecodeError:
        return None
    return _GB18030_2022.get(char, char)


codecs.register_error(_STANDARD_ERRORS, _standard_error)


# The Encoding Standard's EUC-JP (and ISO-2022-JP) reads JIS X 0208 by its index jis0208, which
# has the rows Windows added (NEC's row 13: circled digits, roman numerals; the IBM kanji NEC
# placed in rows 89-92, 髙 and 﨑 among them) and the fullwidth characters Windows reads some
# cells as; Python's euc_jp has neither. That index, below the pointers Shift_JIS keeps for
# user-defined characters, is what cp932 reads at the Shift_JIS bytes of the same pointer.
# Python's euc_jp reads these cells otherwise, and is the only one of its cells to give these.
_EUC_JP_CELLS = {0x301C: "\uff5e", 0x2016: "\u2225", 0x2212: "\uff0d", 0xA2: "\uffe0", 0xA3: "\uffe1", 0xAC: "\uffe2"}


def _jis0208(pointer: int) -> str | None:
    """The character of index jis0208 at ``pointer`` (below 8836), or None."""
    row, cell = divmod(pointer, 188)
    lead = row + (0x81 if row < 0x1F else 0xC1)
    trail = cell + (0x40 if cell < 0x3F else 0x41)
    try:
        return bytes((lead, trail)).decode("cp932")
    except UnicodeDecodeError:
        return None


def euc_jp_encoded(char: str) -> bytes | None:
    """The bytes the Encoding Standard's EUC-JP encoder writes for one non-ASCII character,
    or None when it cannot (the first pointer of index jis0208 that reads as it; never JIS
    X 0212, which Python's euc_jp writes)."""
    point = ord(char)
    if point == 0xA5:
        return b"\x5c"
    if point == 0x203E:
        return b"\x7e"
    if 0xFF61 <= point <= 0xFF9F:
        return bytes((0x8E, point - 0xFF61 + 0xA1))
    if point in _EUC_JP_CELLS and point != 0x2212:
        return None  # cp932 writes these as the fullwidth ones; the index has them not
    try:
        lead, trail = ("\uff0d" if point == 0x2212 else char).encode("cp932")
    except (UnicodeEncodeError, ValueError):
        return None
    pointer = (lead - (0x81 if lead < 0xA0 else 0xC1)) * 188 + trail - (0x40 if trail < 0x7F else 0x41)
    if pointer >= 8836:
        return None
    return bytes((pointer // 94 + 0xA1, pointer % 94 + 0xA1))


# Where cp932 writes a character otherwise than the Encoding Standard's Shift_JIS encoder: the
# IBM kanji and numerals of rows 89-92 (NEC's copies) the standard writes with IBM's bytes
# 0xFA40-0xFC4B, as Windows does; cp932 writes ¢ £ ¬ ‖ 〜 as the fullwidth ones, its user-
# defined characters (U+E000-U+E757) and U+F8F0-U+F8F3 as bytes, where the standard writes
# none; ¥ and ‾ it cannot write, the standard writes them as 0x5C and 0x7E.
_SHIFT_JIS_NONE = frozenset({0xA2, 0xA3, 0xAC, 0x2016, 0x301C, *range(0xE000, 0xE758), *range(0xF8F0, 0xF8F4)})


@lru_cache(maxsize=1)
def _ibm_pointers() -> dict[str, int]:
    """The first pointer past 8835 (IBM's rows) of each character index jis0208 has there."""
    first: dict[str, int] = {}
    for pointer in range(8836, 11104):
        char = _jis0208(pointer)
        if char is not None and not 0xE000 <= ord(char) <= 0xF8FF:
            first.setdefault(char, pointer)
    return first


def shift_jis_encoded(char: str) -> bytes | None:
    """The bytes the Encoding Standard's Shift_JIS encoder writes for one non-ASCII
    character, or None when it cannot (index jis0208's first pointer that reads as it,
    NEC's copies of IBM's rows passed over)."""
    point = ord(char)
    if point == 0xA5:
        return b"\x5c"
    if point == 0x203E:
        return b"\x7e"
    if point in _SHIFT_JIS_NONE:
        return None
    try:
        written = ("\uff0d" if point == 0x2212 else char).encode("cp932")
    except UnicodeEncodeError:
        return None
    if len(written) == 2:
        lead, trail = written
        pointer = (lead - (0x81 if lead < 0xA0 else 0xC1)) * 188 + trail - (0x40 if trail < 0x7F else 0x41)
        if 8272 <= pointer <= 8835:
            pointer = _ibm_pointers()[char]
            row, cell = divmod(pointer, 188)
            return bytes((row + 0xC1, cell + (0x40 if cell < 0x3F else 0x41)))
    return written


def iso2022_jp_encoded(text: str) -> list[str | bytes | int]:
    """``text`` as the Encoding Standard's ISO-2022-JP encoder writes it, in pieces: an ASCII
    character it writes as itself (a str), bytes (escapes, JIS X 0208 pairs, Roman's 0x5C and
    0x7E) and, for a character it cannot write, its code point (an int). The state an escape
    sets lasts across the text: ASCII after ¥ stays in Roman but for "\\" and "~"; halfwidth
    katakana are written as the fullwidth ones (index ISO-2022-JP katakana is NFKC's reading
    of them, but for the two sound marks, which it reads as the spacing ones)."""
    out: list[str | bytes | int] = []
    state = 0  # ASCII, Roman, JIS X 0208
    for char in text:
        point = ord(char)
        if point < 0x80:
            if state == 2 or (state == 1 and char in "\\~"):
                out.append(b"\x1b(B")
                state = 0
            out.append(0xFFFD if point in (0x0E, 0x0F, 0x1B) else char)  # no escape of its own
            continue
        if point in (0xA5, 0x203E):
            if state != 1:
                out.append(b"\x1b(J")
                state = 1
            out.append(b"\x5c" if point == 0xA5 else b"\x7e")
            continue
        if 0xFF61 <= point <= 0xFF9F:
            char = {0xFF9E: "\u309b", 0xFF9F: "\u309c"}.get(point) or unicodedata.normalize("NFKC", char)
        encoded = euc_jp_encoded(char)
        if encoded is None or len(encoded) != 2 or encoded[0] == 0x8E:
            if state == 2:  # the &#N; that stands for it is read as ASCII
                out.append(b"\x1b(B")
                state = 0
            out.append(point)
            continue
        if state != 2:
            out.append(b"\x1b$B")
            state = 2
        out.append(bytes((encoded[0] - 0x80, encoded[1] - 0x80)))
    if state:
        out.append(b"\x1b(B")
    return out


# Shift_JIS's bytes 0xA0 and 0xFD-0xFF are no character and no lead byte: errors to the Encoding
# Standard, but cp932 reads each alone as a private-use character (U+F8F0-U+F8F3), which no
# other of its bytes reads as; an href holding one was fetched with %EF%A3%B0 where a browser
# has %EF%BF%BD, and its query wrote the byte back where a browser writes %26%2365533%3B.
_CP932_SINGLE_PRIVATE = {0xF8F0: "\ufffd", 0xF8F1: "\ufffd", 0xF8F2: "\ufffd", 0xF8F3: "\ufffd"}
# What a codec's text holds that the Encoding Standard reads as another character.
# GB18030-2022, which the Encoding Standard's index gb18030 follows, gave eighteen two-byte codes
# the characters Unicode has since encoded (the vertical forms U+FE10-U+FE19 and U+9FB4-U+9FBB)
# that GB18030-2005, Python's gb18030, reads as private-use ones; the standard reads 0xA3A0 as
# U+3000, and 0xA8BC and 0x8135F437 the other way round (U+1E3F and U+E7C7). Python reads
# each of these private-use characters from these bytes alone.
_GB18030_2022 = {
    **dict(zip(map(chr, range(0xE78D, 0xE797)), "\ufe10\ufe12\ufe11\ufe13\ufe14\ufe15\ufe16\ufe17\ufe18\ufe19")),
    **dict(zip("\ue81e\ue826\ue82b\ue82c\ue832\ue843\ue854\ue864", map(chr, range(0x9FB4, 0x9FBC)))),
    "\ue5e5": "\u3000",
    "\ue7c7": "\u1e3f",
    "\u1e3f": "\ue7c7",
}
# Big5 cells index Big5 reads as Windows does (its cp950) and big5hkscs otherwise: 0xA145 is ‧
# U+2027, the interpunct of Chinese names, not • U+2022; 0xA1E3 ～ U+FF5E, not ∼ U+223C; the
# currency signs are the fullwidth ones. big5hkscs gives each of these from that cell alone.
# (It reads 0xA241 and 0xA242 as it reads 0xA1FE and 0xA240, so those two cannot be told apart.)
_BIG5_CELLS = {
    "\u2022": "\u2027",
    "\uff64": "\ufe51",
    "\u203e": "\u00af",
    "\u223c": "\uff5e",
    "\u2641": "\u2295",
    "\u2609": "\u2299",
    "\u00a5": "\uffe5",
    "\u00a2": "\uffe0",
    "\u00a3": "\uffe1",
}
_READ_OTHERWISE = {
    "cp932": tuple((chr(point), char) for point, char in _CP932_SINGLE_PRIVATE.items()),
    "euc_jp": tuple((chr(point), char) for point, char in _EUC_JP_CELLS.items()),
    "big5hkscs": tuple(_BIG5_CELLS.items()),
}
# What gb18030 writes the standard's characters as: the bytes Python writes for the character
# that reads as it there (U+E5E5 it cannot write).
_GB18030_WRITTEN_AS = {char: pua for pua, char in _GB18030_2022.items() if pua != "\ue5e5"}


# The characters index Big5 has twice from lead byte 0xA1 on, which its encoder writes with the
# later bytes.
_BIG5_LAST = frozenset("\u2550\u255e\u2561\u256a\u5341\u5345")


@lru_cache(maxsize=1)
def _big5_written() -> dict[str, bytes]:
    """The bytes the Big5 encoder writes for each character: the first cell from lead byte
    0xA1 on that a page reads as it (the last for :data:`_BIG5_LAST`). big5hkscs's encoder
    writes the rows before (HKSCS's, and the Latin letters with accents there), which the
    standard's writes none of, and the later of some cells it has twice (U+FF3C as 0xA242, not
    0xA240; U+256D as 0xF9FA, not 0xA27E). Built once, from the decoder: ~15,000 cells."""
    written: dict[str, bytes] = {}
    for lead in range(0xA1, 0xFF):
        for trail in (*range(0x40, 0x7F), *range(0xA1, 0xFF)):
            cell = bytes((lead, trail))
            char = _multi_byte(cell, "big5hkscs")
            if len(char) == 1 and char != "\ufffd" and (char not in written or char in _BIG5_LAST):
                written[char] = cell
    return written


def big5_encoded(char: str) -> bytes | None:
    """The bytes the Encoding Standard's Big5 encoder writes for one non-ASCII character, or
    None when it cannot (:func:`_big5_written`)."""
    return _big5_written().get(char)


def gb18030_encoded(char: str) -> bytes | None:
    """The bytes the Encoding Standard's gb18030 encoder writes for one non-ASCII character,
    or None when it cannot."""
    if char == "\ue5e5":
        return None
    try:
        return _GB18030_WRITTEN_AS.get(char, char).encode("gb18030")
    except UnicodeEncodeError:  # a lone surrogate
        return None


def _multi_byte(body: bytes, codec: str) -> str:
    """``body`` read by Python's ``codec``, its errors and characters as the Encoding Standard
    reads them (:func:`_standard_error`, :data:`_READ_OTHERWISE`)."""
    # gb18030 with gbk, which reads GBK's two-byte codes as gb18030 does and errs on the rest:
    # the error handler reads those (the characters GB18030-2022 changed among them), so the
    # text needs no second pass.
    text = body.decode(
        "gbk" if codec == "gb18030" else codec, errors=_STANDARD_ERRORS if codec in _LEADS else "replace"
    )
    for char, standard in _READ_OTHERWISE.get(codec, ()):
        if char in text:  # str.replace, in C; translate() looks each character up
            text = text.replace(char, standard)
    return text


# ISO-2022-JP as the Encoding Standard reads it. Python's iso2022_jp knows no ESC ( I, the
# switch to katakana in which 0x21-0x5F are katakana: it read ESC ( I as one error and the
# bytes after it as ASCII, so x ESC ( I <a href="/p">, katakana to a browser, was a link; it
# also read JIS X 0208 by its own table (no NEC or IBM rows), a byte an escape's state has no
# character for (a newline among JIS X 0208 pairs, SO, SI) as that byte, an escape after an
# escape as nothing, and an unknown escape ESC $ A as one error where the standard reads "$A".
_ISO2022_JP_ESCAPES = {b"(B": 0, b"(J": 1, b"(I": 2, b"$@": 3, b"$B": 3}
_ISO2022_JP_TABLES = (
    "".join("\ufffd" if b in (0x0E, 0x0F) or b > 0x7F else chr(b) for b in range(256)),
    "".join(
        {0x5C: "\u00a5", 0x7E: "\u203e"}.get(b, "\ufffd" if b in (0x0E, 0x0F) or b > 0x7F else chr(b))
        for b in range(256)
    ),
    "".join(chr(0xFF61 - 0x21 + b) if 0x21 <= b <= 0x5F else "\ufffd" for b in range(256)),
)
# In JIS X 0208's state: runs of pairs; a first byte and one that is none (one error, or the
# first byte alone at the end); any other byte (an error).
_JIS_X_0208_RUN = re.compile(rb"((?:[\x21-\x7e]{2})+)|[\x21-\x7e][^\x21-\x7e]?|[^\x21-\x7e]")
_JIS_TO_EUC = bytes.maketrans(bytes(range(0x21, 0x7F)), bytes(range(0xA1, 0xFF)))


# Python's codec reads a document as the standard does (but for the cells of _EUC_JP_CELLS, and
# the JIS X 0208 ones it lacks, where it errs) when its bytes are ASCII but SO and SI, each
# escape is to ASCII, Roman or JIS X 0208 and followed by no escape at once, and JIS X 0208's
# state holds no byte outside 0x21-0x7E (an odd one out, it errs on too). One search finds
# the escape that breaks one of these.
_ISO2022_JP_IRREGULAR = re.compile(rb"\x1b(?:(?!\([BJ]|\$[@B])|[($][@BJ]\x1b|\$[@B][\x21-\x7e]*+[^\x1b\x21-\x7e])")


def _iso2022_jp_plain(body: bytes) -> bool:
    """Whether Python's iso2022_jp reads ``body`` as the Encoding Standard does."""
    return body.isascii() and b"\x0e" not in body and b"\x0f" not in body and _ISO2022_JP_IRREGULAR.search(body) is None


def _iso2022_jp(body: bytes) -> str:
    """``body`` read by the Encoding Standard's ISO-2022-JP decoder."""
    if _iso2022_jp_plain(body):
        try:  # Python's codec, in C, for the documents it reads right (no cell it lacks)
            text = body.decode("iso2022_jp")
        except UnicodeDecodeError:
            pass
        else:
            for char, standard in _READ_OTHERWISE["euc_jp"]:
                if char in text:
                    text = text.replace(char, standard)
            return text
    out: list[str] = []
    state = 0  # ASCII, Roman, katakana, JIS X 0208 (the escapes' order above)
    output = False  # the last thing read was an escape: another at once is an error
    pos = 0
    while True:
        escape = body.find(b"\x1b", pos)
        end = len(body) if escape < 0 else escape
        if end > pos:
            part = body[pos:end]
            if state < 3:
                out.append(codecs.charmap_decode(part, "strict", _ISO2022_JP_TABLES[state])[0])
            else:
                for found in _JIS_X_0208_RUN.finditer(part):
                    pairs = found.group(1)
                    out.append("\ufffd" if pairs is None else _multi_byte(pairs.translate(_JIS_TO_EUC), "euc_jp"))
            output = False
        if escape < 0:
            return "".join(out)
        switch = _ISO2022_JP_ESCAPES.get(body[escape + 1 : escape + 3])
        if switch is None:  # an error; the bytes after ESC are read again
            out.append("\ufffd")
            output = False
            pos = escape + 1
        else:
            if output:
                out.append("\ufffd")
            output = True
            state = switch
            pos = escape + 3


def decode(body: bytes, encoding: str) -> str:
    """``body`` read as the Encoding Standard's decoder for ``encoding`` (a codec name from
    :func:`beamcrawl.core.content.sniff.detect_charset`, :data:`REPLACEMENT` or
    :data:`X_USER_DEFINED`) reads it; bad bytes become U+FFFD.

    Raises:
        LookupError: ``encoding`` names no codec.
    """
    if encoding == REPLACEMENT:
        return "\ufffd" if body else ""
    table = single_byte_table(encoding)
    if table is not None:
        return codecs.charmap_decode(body, "replace", table)[0]
    if encoding == "iso2022_jp":
        return _iso2022_jp(body)
    return _multi_byte(body, encoding)
