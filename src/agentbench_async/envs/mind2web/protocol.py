"""The multiple-choice protocol of one Mind2Web step (AgentBench v0.2): candidate pool, reply parsing and
the step metrics (element accuracy, action F1, step success).

A step is a knockout over the ranker's top ``TOP_K`` candidates: rounds of up to ``ROUND_SIZE``
candidates; a round's pick goes back to the end of the pool and competes again; "A" (none of the above)
eliminates the whole round. See docs/envs/mind2web.md.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree as ET

from .dom import render_round

TOP_K = 10  # candidates ranked below this are never shown
ROUND_SIZE = 5  # candidates per round (choices B..F)
PREVIOUS_K = 5  # previous actions shown
SEED = 123
LETTERS = "ABCDEF"

_ANSWER = re.compile(r"Answer: (A|B|C|D|E|F)")
_ACTION = re.compile(r"Action: (CLICK|SELECT|TYPE)")
_VALUE = re.compile(r"Value: (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Reply:
    """A parsed model reply: the letter (``A`` when none is readable), the action string, whether an
    ``Answer: <letter>`` was found at all."""

    letter: str
    action: str
    readable: bool


def _action_string(text: str) -> str:
    op = _ACTION.search(text)
    value = _VALUE.search(text)
    return (op.group(1) if op else "").strip() + " " + (value.group(1) if value else "").strip()


def parse_reply(text: str) -> Reply:
    """Upstream's ``postprocess_action_llm``: first ``Answer: X`` (default A), ``Action:``, ``Value:``."""
    text = text.strip()
    answer = _ANSWER.search(text)
    return Reply(letter=answer.group(1) if answer else "A", action=_action_string(text), readable=answer is not None)


def gold_action(html: str | ET.Element, gold_id: str, op: str, value: str) -> str:
    """The gold action string as upstream derives it (``Mind2Web.get_data``): the page rendered with the step's first
    positive as the only candidate, the one-choice answer written for it (``<letter>.\\nAction: <op>\\n`` plus
    ``Value: <value>`` unless CLICK; just ``A.`` if the render shows no id for it) and read back with
    ``postprocess_action``'s patterns, so ``"CLICK "``, ``"TYPE <first line of value, stripped>"``. Raises
    ``PageError`` where upstream's loader crashed (the positive missing from the page, or a ``<text>`` node)."""
    choices = render_round(html, [gold_id]).choices
    index = next((i for i, (node_id, _) in enumerate(choices) if node_id == gold_id), None)
    answer = "A." if index is None else f"{LETTERS[index + 1]}.\nAction: {op}\n" + (f"Value: {value}" if op != "CLICK" else "")
    return _action_string(answer.strip())


def action_f1(pred: str, gold: str) -> float:
    """F1 over whitespace-token sets, case-sensitive; both empty = 1, one empty = 0."""
    p, g = set(pred.split()), set(gold.split())
    if not p and not g:
        return 1.0
    if not p or not g:
        return 0.0
    tp = len(p & g)
    if tp == 0:
        return 0.0
    precision, recall = tp / len(p), tp / len(g)
    return 2 * precision * recall / (precision + recall)


def shown_ids(candidates: list[dict[str, Any]]) -> list[str]:
    """Ids of the candidates the ranker put in its top ``TOP_K``."""
    return [c["backend_node_id"] for c in candidates if c["rank"] < TOP_K]


def initial_pool(data: dict[str, Any]) -> list[str]:
    """Positives then negatives of the top ``TOP_K``, shuffled by a generator seeded per sample (the fix of
    upstream's process-global ``random``, whose order depended on the samples run before)."""
    pool = shown_ids(data["pos_candidates"]) + shown_ids(data["neg_candidates"])
    random.Random(f"{SEED}-{data['index']}").shuffle(pool)
    return pool


def step_metrics(prediction: tuple[str, str], target: dict[str, Any] | None) -> dict[str, Any]:
    """Element correctness, action F1 and step success of one prediction (0 when there is no target)."""
    if target is None:
        return {"element_correct": False, "action_f1": 0.0, "step_success": False}
    element_ok = prediction[0] in target["element"]
    f1 = action_f1(prediction[1], target["action"])
    return {"element_correct": element_ok, "action_f1": f1, "step_success": element_ok and f1 >= 1.0}
