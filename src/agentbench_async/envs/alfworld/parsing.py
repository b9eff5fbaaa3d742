"""Reading an ALFWorld reply: the ``ACTION:`` line, the nearest admissible command, the repeat rule.

AgentBench v0.2 (``process_action``): the first ``ACTION:(.*)`` match (case-sensitive, one line) is the
action; it is stripped, lower-cased and cut at its first newline. An empty action is invalid. If the
engine lists no commands it is used as is; if it is one of the listed commands it is used; otherwise the
listed command with the highest sentence BLEU against it (NLTK's ``sentence_bleu`` with Chen & Cherry's
smoothing method 4, whitespace tokens, weights 0.25 x 4) is used when that score exceeds 0.01, else the
raw text is sent (the engine answers ``Nothing happens.``). BLEU is computed here, without NLTK.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass

ACTION_RE = re.compile(r"ACTION:(.*)")
MATCH_THRESHOLD = 0.01  # a command must score above this to replace the model's text
REPEAT_WINDOW = 3  # identical raw replies that end the episode (checked once the log has more entries)
_SMOOTHING_K = 5  # NLTK SmoothingFunction's default k, used by method 4
_WEIGHTS = (0.25, 0.25, 0.25, 0.25)


@dataclass(frozen=True)
class Mapped:
    """What a model's action became: the command sent to the engine and how it was found."""

    command: str  # what goes to the engine
    raw: str  # the model's action (stripped, lower-cased, first line)
    how: str  # "exact", "unlisted" (the engine listed nothing), "nearest" or "unmatched"
    score: float = 1.0  # BLEU of the chosen command ("nearest"), best score seen ("unmatched")


def extract_action(reply: str) -> str | None:
    """The action of a text-mode reply: ``None`` without an ``ACTION:`` line, ``""`` if it is empty."""
    match = ACTION_RE.search(reply)
    if match is None:
        return None
    return normalise(match.group(1))


def tool_argument(arguments: str) -> str | None:
    """Tools mode (AgentBench FC): the action in a ``take_action`` call's JSON arguments: the first argument's value,
    whatever its name, as FC reads it; ``None`` if there is no string there."""
    try:
        values = json.loads(arguments or "{}")
    except ValueError:
        return None
    if not isinstance(values, dict) or not values:
        return None
    value = next(iter(values.values()))
    return value if isinstance(value, str) else None


def normalise(text: str) -> str:
    """Upstream's clean-up of an action: strip, lower-case, keep the first line."""
    return text.strip().lower().split("\n")[0]


def _ngrams(tokens: list[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


class _Hypothesis:
    """A model's action split and counted once, scored against many commands (a long reply costs its
    length once, not once per admissible command)."""

    def __init__(self, text: str) -> None:
        self.tokens = text.split()
        self.counts = [_ngrams(self.tokens, n) for n in range(1, len(_WEIGHTS) + 1)]

    def bleu(self, reference: str) -> float:
        """NLTK's ``sentence_bleu([reference.split()], hypothesis.split(), smoothing_function=method4)``."""
        ref = reference.split()
        hyp_len = len(self.tokens)
        precisions: list[tuple[int, int]] = []  # (clipped matches, max(1, hypothesis n-grams)) per order
        for n, hyp_counts in enumerate(self.counts, start=1):
            matches = sum(min(count, hyp_counts[gram]) for gram, count in _ngrams(ref, n).items())
            precisions.append((matches, max(1, hyp_len - n + 1)))
        if precisions[0][0] == 0:
            return 0.0
        values: list[float] = []
        smoothed = 1
        for matches, total in precisions:
            if matches == 0 and hyp_len > 1:  # method 4: 1 / (2^j * k / ln L), j counting the zero orders
                values.append(1 / (2**smoothed * _SMOOTHING_K / math.log(hyp_len)) / total)
                smoothed += 1
            else:
                values.append(matches / total)
        ref_len = len(ref)
        penalty = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
        return penalty * math.exp(math.fsum(w * math.log(p) for w, p in zip(_WEIGHTS, values) if p > 0))


def sentence_bleu(reference: str, hypothesis: str) -> float:
    """NLTK's ``sentence_bleu([reference.split()], hypothesis.split(), smoothing_function=method4)``."""
    return _Hypothesis(hypothesis).bleu(reference)


def nearest_admissible(action: str, choices: list[str]) -> Mapped:
    """Map a (normalised) action onto the engine's admissible commands as upstream does."""
    if not choices:
        return Mapped(command=action, raw=action, how="unlisted")
    if action in choices:
        return Mapped(command=action, raw=action, how="exact")
    best_index, best = 0, -1.0
    try:
        hypothesis = _Hypothesis(action)
        for index, choice in enumerate(choices):
            score = hypothesis.bleu(choice)
            if score > best:  # first in list order on ties, like numpy.argmax
                best_index, best = index, score
    except (ValueError, ZeroDivisionError, OverflowError):
        return Mapped(command=action, raw=action, how="unmatched", score=0.0)
    if best > MATCH_THRESHOLD:
        return Mapped(command=choices[best_index], raw=action, how="nearest", score=best)
    return Mapped(command=action, raw=action, how="unmatched", score=max(best, 0.0))


def repeats(outputs: list[str]) -> bool:
    """Upstream's repeat rule over the raw replies logged so far (this turn's included): with more than
    three entries, the last three identical end the episode (so it can first fire at the fourth turn)."""
    return len(outputs) > REPEAT_WINDOW and len(set(outputs[-REPEAT_WINDOW:])) == 1
