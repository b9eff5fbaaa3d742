"""The nouns of a product title, for the reward's title score.

Upstream runs spaCy's ``en_core_web_lg`` over the titles and keeps the lower-cased tokens tagged NOUN or
PROPN. That model is not on PyPI, so:

* products of the built-in catalog carry their nouns (``title_nouns``, authored by the generator);
* otherwise the ``nouns`` option says who tags titles: ``spacy`` (upstream's way, with the model named by
  ``spacy_model``, default ``en_core_web_lg``: an installed model package or a model folder) or ``heuristic``,
  a documented approximation: every word of the title that contains a letter and is not a closed-class English
  word (article, preposition, conjunction, pronoun, ...) or a number counts as a noun. A run that does not say
  gets ``spacy`` when spaCy and the model are installed, else ``heuristic`` (``default_source``), and stores
  which one it used with its settings (a heuristic run is marked as differing from AgentBench v0.2).
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

from ...environment import EnvUnavailableError

NounFn = Callable[[str], tuple[str, ...]]
DEFAULT_SPACY_MODEL = "en_core_web_lg"
SOURCES = ("spacy", "heuristic")

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-\.]*")
_CLOSED_CLASS = frozenset(
    """a an the and or nor but if so yet for of to in on at by with without from into onto over under up down
    out off about above below between among through during before after since until within across along
    around behind beyond near per via than as is are was were be been being am do does did has have had
    it its this that these those they them their there here he she his her him we our us you your i my me
    mine not no all any each every some both either neither such only very more most less least much many
    few other another same own can will just also too x""".split()
)


def heuristic_nouns(title: str) -> tuple[str, ...]:
    words = []
    for match in _WORD.finditer(title):
        word = match.group().strip(".-'").lower()
        if word and any(c.isalpha() for c in word) and word not in _CLOSED_CLASS:
            words.append(word)
    return tuple(words)


def spacy_available(model: str) -> bool:
    """Whether spaCy and ``model`` (an installed model package, or a model folder) are there, without loading them."""
    if importlib.util.find_spec("spacy") is None:
        return False
    if Path(model).expanduser().is_dir():
        return True
    try:
        return model.isidentifier() and importlib.util.find_spec(model) is not None
    except (ImportError, ValueError):
        return False


def default_source(spacy_model: str = DEFAULT_SPACY_MODEL) -> str:
    """``spacy`` when spaCy and the model are installed here, else ``heuristic``."""
    return "spacy" if spacy_available(spacy_model) else "heuristic"


def _spacy_nouns(model: str) -> NounFn:
    try:
        import spacy  # type: ignore[import-not-found]

        nlp = spacy.load(str(Path(model).expanduser()) if Path(model).expanduser().is_dir() else model)
    except (ImportError, OSError) as exc:
        raise EnvUnavailableError(
            f"webshop: nouns=spacy needs spaCy with the model {model!r} ({type(exc).__name__}: {str(exc).splitlines()[0]}); "
            f"install them (pip install spacy && python -m spacy download {model}) or run with --env-option webshop.nouns=heuristic"
        ) from None

    def nouns(title: str) -> tuple[str, ...]:
        # upstream also lists the non-existent tag "PNOUN"
        return tuple(t.text.lower() for t in nlp(title) if t.pos_ in ("NOUN", "PROPN"))

    return nouns


def noun_tagger(source: str, spacy_model: str = DEFAULT_SPACY_MODEL) -> tuple[NounFn, str]:
    """(title -> nouns, cached per title; its name for the results: ``spacy:<model>`` or ``heuristic``)."""
    tagger = _spacy_nouns(spacy_model) if source == "spacy" else heuristic_nouns
    name = f"spacy:{spacy_model}" if source == "spacy" else "heuristic"
    return functools.lru_cache(maxsize=65536)(tagger), name
