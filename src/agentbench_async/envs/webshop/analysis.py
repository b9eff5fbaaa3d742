"""Text -> index terms as Anserini 0.14.3's ``DefaultEnglishAnalyzer`` makes them (the analyzer WebShop's index uses).

Lucene 8.11's chain: ``StandardTokenizer`` (Unicode word boundaries, UAX #29) -> ``EnglishPossessiveFilter``
(a trailing ``'s``, ``’s`` or ``＇s``) -> ``LowerCaseFilter`` -> ``StopFilter`` (Lucene's 33 English stop words)
-> ``PorterStemFilter`` (``porter.py``).

The tokenizer applies UAX #29's word break rules as Lucene's JFlex grammar states them (the longest rule match
wins, as in the scanner), as regular expressions over character classes built from ``unicodedata`` (a plain
ASCII chunk takes a short path with the same rules):

* letters (and letter-like symbols) join with letters, digits with digits, letters with digits (``3.5x2.5``,
  ``abc123``); ``_`` and other connector punctuation join anything (``gluten_free``);
* between two letters ``:``, ``.``, ``'``, ``’`` (and a few more) join (``l'eau``, ``a.b``, ``a:b``); between two
  digits ``.``, ``,``, ``;``, ``'`` join (``6.76``, ``1,000``); a hyphen, a slash or a space always splits;
* combining marks, format characters (the soft hyphen) and joiners stay inside the token they follow;
* each CJK ideograph and each hiragana is a token of its own, runs of katakana, hangul or Thai/Lao/Myanmar/Khmer
  letters are one token; emoji (and ©, ®, ™) are tokens, with their modifiers and joiner sequences;
* anything else (punctuation, symbols, spaces) separates tokens and is dropped; a token longer than 255
  UTF-16 units is cut into pieces of at most 255 (Lucene's ``maxTokenLength``).

Checked against the real analyzer in ``tests/fixtures/webshop_anserini`` (README there). Differences left: a
Hebrew letter + apostrophe after another letter, a skin-tone modifier after an emoji that takes none, a keycap
mark after a pictograph, and characters whose Unicode properties changed after Unicode 9.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import unicodedata

from .porter import porter_stem

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (Anserini's default stop words)
STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)
MAX_TOKEN_LENGTH = 255  # StandardTokenizer's default, in UTF-16 code units

# UAX #29 word-break classes (Unicode 9.0 as Lucene 8's grammar lists them) that are plain lists
_MID_LETTER = "\u003a\u00b7\u0387\u05f4\u2027\ufe13\ufe55\uff1a"
_MID_NUM_LET = "\u002e\u2018\u2019\u2024\ufe52\uff07\uff0e\u0027"  # with Single_Quote
_MID_NUM = "\u002c\u003b\u037e\u0589\u060c\u060d\u066c\u07f8\u2044\ufe10\ufe14\ufe50\ufe54\uff0c\uff1b"
_ZWSP = 0x200B  # Cf but not WB Format (the other joiners, ZWNJ and ZWJ, are WB Extend and ZWJ: kept in tokens)
_ZWJ = "\u200d"
# ranges of scripts the grammar treats apart (Script=Han, Hiragana, Katakana; Line_Break=Complex_Context)
_HAN = [(0x2E80, 0x2E99), (0x2E9B, 0x2EF3), (0x2F00, 0x2FD5), (0x3005, 0x3005), (0x3007, 0x3007), (0x3021, 0x3029),
        (0x3038, 0x303B), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFA6D), (0xFA70, 0xFAD9), (0x20000, 0x2FA1D),
        (0x30000, 0x3134A)]
_HIRAGANA = [(0x3041, 0x3096), (0x309D, 0x309F), (0x1B001, 0x1B11E), (0x1F200, 0x1F200)]
_KATAKANA = [(0x3031, 0x3035), (0x309B, 0x309C), (0x30A0, 0x30FA), (0x30FC, 0x30FF), (0x31F0, 0x31FF), (0x32D0, 0x32FE),
             (0x3300, 0x3357), (0xFF66, 0xFF9D), (0x1B000, 0x1B000)]
_COMPLEX_CONTEXT = [(0x0E01, 0x0E3A), (0x0E40, 0x0E4E), (0x0E81, 0x0EDF), (0x1000, 0x103F), (0x1050, 0x108F),
                    (0x109A, 0x109F), (0x1780, 0x17D3), (0x17D7, 0x17D7), (0x17DC, 0x17DD), (0x1950, 0x19DF),
                    (0x1A20, 0x1AAD), (0xA9E0, 0xA9FE), (0xAA60, 0xAADF), (0x11700, 0x1173F)]
_DIGITS_IN_COMPLEX = [(0x0E50, 0x0E59), (0x0ED0, 0x0ED9), (0x1040, 0x1049), (0x1090, 0x1099), (0x17E0, 0x17E9),
                      (0x1946, 0x194F), (0x19D0, 0x19D9), (0x1A80, 0x1A99), (0xA9F0, 0xA9F9), (0x11730, 0x11739)]
# symbols that are letters to UAX #29 (Alphabetic, or listed in the ALetter derivation)
_LETTER_SYMBOLS = [(0x02C2, 0x02C5), (0x02D2, 0x02D7), (0x02DE, 0x02DF), (0x02E5, 0x02EB), (0x02ED, 0x02ED),
                   (0x02EF, 0x02FF), (0x055A, 0x055C), (0x055E, 0x055E), (0x058A, 0x058A), (0x05F3, 0x05F3),
                   (0xA708, 0xA716), (0xA720, 0xA721), (0xA789, 0xA78A), (0xAB5B, 0xAB5B), (0x24B6, 0x24E9),
                   (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189)]
# Extended_Pictographic (emoji-data 11.0, what Lucene's grammar includes), less the letters above
_PICTOGRAPHIC = [(0x00A9, 0x00A9), (0x00AE, 0x00AE), (0x203C, 0x203C), (0x2049, 0x2049), (0x2122, 0x2122),
                 (0x2139, 0x2139), (0x2194, 0x2199), (0x21A9, 0x21AA), (0x231A, 0x231B), (0x2328, 0x2328),
                 (0x2388, 0x2388), (0x23CF, 0x23CF), (0x23E9, 0x23F3), (0x23F8, 0x23FA), (0x24C2, 0x24C2),
                 (0x25AA, 0x25AB), (0x25B6, 0x25B6), (0x25C0, 0x25C0), (0x25FB, 0x25FE), (0x2600, 0x2605),
                 (0x2607, 0x2612), (0x2614, 0x2685), (0x2690, 0x2705), (0x2708, 0x2712), (0x2714, 0x2714),
                 (0x2716, 0x2716), (0x271D, 0x271D), (0x2721, 0x2721), (0x2728, 0x2728), (0x2733, 0x2734),
                 (0x2744, 0x2744), (0x2747, 0x2747), (0x274C, 0x274C), (0x274E, 0x274E), (0x2753, 0x2755),
                 (0x2757, 0x2757), (0x2763, 0x2767), (0x2795, 0x2797), (0x27A1, 0x27A1), (0x27B0, 0x27B0),
                 (0x27BF, 0x27BF), (0x2934, 0x2935), (0x2B05, 0x2B07), (0x2B1B, 0x2B1C), (0x2B50, 0x2B50),
                 (0x2B55, 0x2B55), (0x3030, 0x3030), (0x303D, 0x303D), (0x3297, 0x3297), (0x3299, 0x3299),
                 (0x1F000, 0x1F0FF), (0x1F10D, 0x1F10F), (0x1F12F, 0x1F12F), (0x1F16C, 0x1F16F), (0x1F18E, 0x1F18E),
                 (0x1F191, 0x1F19A), (0x1F1AD, 0x1F1E5), (0x1F201, 0x1F20F), (0x1F21A, 0x1F21A), (0x1F22F, 0x1F22F),
                 (0x1F232, 0x1F23A), (0x1F23C, 0x1F23F), (0x1F249, 0x1F3FA), (0x1F400, 0x1F53D), (0x1F546, 0x1F64F),
                 (0x1F680, 0x1F6FF), (0x1F774, 0x1F77F), (0x1F7D5, 0x1F7FF), (0x1F80C, 0x1F80F), (0x1F848, 0x1F84F),
                 (0x1F85A, 0x1F85F), (0x1F888, 0x1F88F), (0x1F8AE, 0x1F8FF), (0x1F90C, 0x1F93A), (0x1F93C, 0x1F945),
                 (0x1F947, 0x1FFFD)]
_HEBREW = [(0x05D0, 0x05F2), (0xFB1D, 0xFB4F)]  # Hebrew_Letter candidates (the Lo ones)
_EMOJI_MODIFIER = [(0x1F3FB, 0x1F3FF)]
_REGIONAL_INDICATOR = [(0x1F1E6, 0x1F1FF)]
_LAST_ASSIGNED = 0x323AF  # nothing above this (but tags and variation selectors) is assigned in Unicode 15
# the order of _kinds()'s numbers (a later list wins where two overlap)
_RANGES = [_HAN, _HIRAGANA, _KATAKANA, _COMPLEX_CONTEXT, _DIGITS_IN_COMPLEX, _LETTER_SYMBOLS, _PICTOGRAPHIC, _HEBREW]
_HAN_, _HIRAGANA_, _KATAKANA_, _COMPLEX_, _COMPLEX_DIGIT_, _LETTER_SYMBOL_, _PICTOGRAPHIC_, _HEBREW_ = range(1, 9)
_POSSESSIVE = re.compile("['\u2019\uff07][sS]$")
_JAVA_LOWER = str.maketrans({"\u0130": "i", "\u03a3": "\u03c3"})  # Character.toLowerCase: no İ -> i̇, no final ς


def _kinds() -> bytearray:
    """Per code point up to _LAST_ASSIGNED: which of the listed ranges holds it (0: none)."""
    kinds = bytearray(_LAST_ASSIGNED + 1)
    for kind, ranges in enumerate(_RANGES, start=1):
        for lo, hi in ranges:
            hi = min(hi, _LAST_ASSIGNED)
            kinds[lo:hi + 1] = bytes([kind]) * (hi - lo + 1)
    return kinds


def _class(chars: list[int]) -> str:
    """A regex character class of the code points (sorted, merged into ranges)."""
    parts, i = [], 0
    while i < len(chars):
        j = i
        while j + 1 < len(chars) and chars[j + 1] == chars[j] + 1:
            j += 1
        lo, hi = re.escape(chr(chars[i])), re.escape(chr(chars[j]))
        parts.append(lo if i == j else f"{lo}-{hi}")
        i = j + 1
    return "[" + "".join(parts) + "]"


@functools.cache
def _grammar() -> tuple[re.Pattern[str], tuple[re.Pattern[str], ...]]:
    """(an expression finding where the next token starts, the token rules in the grammar's order): built once,
    ~0.5 s over the Unicode database. The scanner takes the longest rule match, the earlier rule on a tie."""
    classes: dict[str, list[int]] = {k: [] for k in ("X", "A", "HEB", "N", "K", "E", "SA", "HAN", "HIRA", "PIC")}
    kinds = _kinds()
    special = {ord(c) for c in _MID_LETTER + _MID_NUM_LET + _MID_NUM}
    for cp in [*range(_LAST_ASSIGNED + 1), *range(0xE0000, 0xE01F0)]:
        cat = unicodedata.category(chr(cp))
        if cat in ("Cn", "Co", "Cs", "Zs", "Cc") or cp in special:
            continue
        kind = kinds[cp] if cp <= _LAST_ASSIGNED else 0
        if kind == _PICTOGRAPHIC_:
            classes["PIC"].append(cp)  # and a letter too when it is one (ℹ, Ⓜ): the longer match decides
        if kind == _HAN_ and cat[0] in "LN":
            classes["HAN"].append(cp)
        elif kind == _HIRAGANA_ and cat[0] == "L":
            classes["HIRA"].append(cp)
        elif kind == _KATAKANA_:
            classes["K"].append(cp)
        elif kind == _COMPLEX_ and cat[0] in "LM":
            classes["SA"].append(cp)
        elif cat in ("Mn", "Me", "Mc") or (cat == "Cf" and cp != _ZWSP):
            classes["X"].append(cp)
        elif cat == "Nd" or cp == 0x066B:
            classes["N"].append(cp)
        elif cat == "Pc":
            classes["E"].append(cp)
        elif cat[0] == "L" or cat == "Nl" or kind == _LETTER_SYMBOL_:
            classes["A"].append(cp)
            if kind == _HEBREW_ and cat == "Lo":
                classes["HEB"].append(cp)
    x = _class(classes["X"]) + "*"
    a, heb, n, k, e = (f"(?:{_class(classes[c])}{x})" for c in ("A", "HEB", "N", "K", "E"))
    mid_letter = f"(?:[{re.escape(_MID_LETTER + _MID_NUM_LET)}]{x})"
    mid_num = f"(?:[{re.escape(_MID_NUM + _MID_NUM_LET)}]{x})"
    hebrew_quote = f"{heb}(?:'{x}|\"{x}{heb})"  # WB7a-c
    group = (f"(?:{k}(?:{e}*{k})*"
             f"|(?:{hebrew_quote}|{a}(?:(?:{e}*|{mid_letter}){a})*|{n}(?:(?:{e}*|{mid_num}){n})*)+)")
    word = f"{e}*{group}(?:{e}+{group})*{e}*"
    # emoji: keycaps, flags, pictographs with their modifiers, presentation selector and ZWJ sequences
    x_emoji = _class([c for c in classes["X"] if c not in (0xFE0E, 0xFE0F, 0x200D)]) + "*"
    x_tail = _class([c for c in classes["X"] if c not in (0xFE0E, 0xFE0F)]) + "*"
    modifier = f"(?:{_class([cp for lo, hi in _EMOJI_MODIFIER for cp in range(lo, hi + 1)])}{x_emoji})"
    # (a modifier is taken after any pictograph, Lucene only after Emoji_Modifier_Base ones)
    pictograph = f"(?:{_ZWJ}*{_class(classes['PIC'])}{x_emoji}(?:{modifier}|\ufe0f)?|{modifier})"
    regional = f"(?:{_class([cp for lo, hi in _REGIONAL_INDICATOR for cp in range(lo, hi + 1)])}{x})"
    emoji = (f"[0-9#*]{x_tail}\ufe0f?\u20e3{x_tail}|{regional}{regional}"
             f"|{pictograph}(?:(?:{_ZWJ}+{pictograph})*{x_tail}|[\U000e0020-\U000e007e]+\U000e007f)")
    complex_context = f"(?:{_class(classes['SA'])}{x})+"
    single = f"{_class(classes['HAN'])}{x}|{_class(classes['HIRA'])}{x}"
    rules = (emoji, word, complex_context, single)
    return re.compile("|".join(rules)), tuple(re.compile(r) for r in rules)


def _utf16_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


def _cut(text: str, units: int) -> str:
    """The longest prefix of ``text`` of at most ``units`` UTF-16 code units."""
    out = text[:units]
    while _utf16_length(out) > units:
        out = out[:-1]
    return out


# The same rules restricted to ASCII, where they reduce to: runs of letters, digits and '_' (all of which join
# each other), joined by ':' '.' "'" between two letters or '.' ',' ';' "'" between two digits.
_ASCII_TOKEN = re.compile(
    r"_*[A-Za-z0-9][A-Za-z0-9_]*(?:(?:(?<=[A-Za-z])[:.'](?=[A-Za-z])|(?<=[0-9])[.,;'](?=[0-9]))[A-Za-z0-9_]+)*"
)


def _longest(rules: tuple[re.Pattern[str], ...], text: str, start: int) -> str | None:
    """The longest rule match at ``start`` (the earlier rule on a tie), as the JFlex scanner picks it."""
    best: str | None = None
    for rule in rules:
        match = rule.match(text, start)
        if match is not None and (best is None or len(match.group()) > len(best)):
            best = match.group()
    return best


def _scan(text: str, ascii_only: bool) -> list[str]:
    """The tokens of ``text``, a token longer than 255 UTF-16 units cut as Lucene's scanner cuts it: the
    longest match within its 255-unit buffer, the scan going on after it (one character on when none fits)."""
    finder, rules = (_ASCII_TOKEN, (_ASCII_TOKEN,)) if ascii_only else _grammar()
    tokens = []
    pos = 0
    while (found := finder.search(text, pos)) is not None:
        start = found.start()
        token = found.group() if ascii_only else _longest(rules, text, start)
        assert token is not None
        if len(token) > MAX_TOKEN_LENGTH and _utf16_length(token) > MAX_TOKEN_LENGTH:
            token = _longest(rules, _cut(text[start:], MAX_TOKEN_LENGTH), 0)
            if token is None:
                pos = start + 1
                continue
        tokens.append(token)
        pos = start + len(token)
    return tokens


def tokenize(text: str) -> list[str]:
    """Lucene StandardTokenizer's tokens of ``text`` (case kept).

    No token spans white space, so each white-space separated chunk is tokenized alone: a plain ASCII word is
    its own token, other ASCII chunks go through the ASCII expression, the rest through the full one."""
    tokens: list[str] = []
    for chunk in text.split():
        if chunk.isascii() and len(chunk) <= MAX_TOKEN_LENGTH:
            tokens.extend((chunk,) if chunk.isalnum() else _ASCII_TOKEN.findall(chunk))
        else:
            tokens.extend(_scan(chunk, chunk.isascii()))
    return tokens


class Analyzer:
    """Text -> index terms (tokenize, drop possessives, lower-case, stop words, Porter stems); thread-safe."""

    _STEM_CACHE_LIMIT = 1_000_000  # queries are model text: keep the cache bounded

    def __init__(self) -> None:
        self._stems: dict[str, str] = {}
        self._lock = threading.Lock()

    def terms(self, text: str) -> list[str]:
        out: list[str] = []
        stems = self._stems
        for token in tokenize(text):
            word = _POSSESSIVE.sub("", token).translate(_JAVA_LOWER).lower()
            if not word or word in STOP_WORDS:
                continue
            stem = stems.get(word)
            if stem is None:
                stem = porter_stem(word)
                if len(stems) < self._STEM_CACHE_LIMIT:
                    with self._lock:
                        stems[sys.intern(word)] = stem
            out.append(stem)
        return out
