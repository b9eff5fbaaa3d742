"""Mock-model policies for ``mind2web``.

Each request is one round: the prompt's examples and, last, the page with its lettered choices. The
policies find out which candidates the round shows the way the environment chose them: they replay the
step's knockout (the same seeded pool, the same rendering) with their own answers until a round renders
exactly the page in the request, so a letter always means the element the environment put behind it.

``oracle`` picks a gold element whenever the round shows one (else A) with the gold operation and value.
``weak`` picks one failure mode per task: a wrong element, the right element with a wrong action, always
"None of the above", no ``Answer:`` line, a full context window at once, or after a first pick.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...environment import Policy, PolicyReply, PolicyRequest, stable_choice
from .dom import render_round
from .protocol import ROUND_SIZE, initial_pool

Chooser = Callable[[dict[str, Any], list[str], int], int | None]  # (task data, choice ids, round) -> choice index or None (A)


def _page_of(req: PolicyRequest) -> str:
    content = req.messages[-1].get("content") or ""
    return content.split("'''\n", 1)[-1].rsplit("\n'''", 1)[0]


def _find_round(data: dict[str, Any], page: str, choose: Chooser) -> tuple[int, list[str]] | None:
    """Replay the knockout with ``choose`` as the model until a round renders ``page``: (round, choice ids)."""
    pool = initial_pool(data)
    n = 0
    while len(pool) > 1:
        ids, pool = pool[:ROUND_SIZE], pool[ROUND_SIZE:]
        rnd = render_round(data["cleaned_html"], ids)
        choice_ids = [node_id for node_id, _ in rnd.choices]
        if rnd.page == page:
            return n, choice_ids
        k = choose(data, choice_ids, n)
        if k is not None and k < len(choice_ids):
            pool.append(choice_ids[k])
        n += 1
    return None


def _gold_index(data: dict[str, Any], choice_ids: list[str], n: int) -> int | None:
    gold = set(data["target"]["element"]) if data["target"] else set()
    return next((i for i, node_id in enumerate(choice_ids) if node_id in gold), None)


def _answer(k: int | None, op: str, value: str, thought: str) -> PolicyReply:
    if k is None:
        return PolicyReply(content=f"Thought: {thought}\nAnswer: A.")
    text = f"Thought: {thought}\nAnswer: {chr(ord('B') + k)}.\nAction: {op}"
    if op != "CLICK":
        text += f"\nValue: {value}"
    return PolicyReply(content=text)


def oracle(req: PolicyRequest) -> PolicyReply:
    data = req.task.data
    found = _find_round(data, _page_of(req), _gold_index)
    if found is None:
        return PolicyReply(content="Thought: I cannot place this page.\nAnswer: A.")
    k = _gold_index(data, found[1], found[0])
    op = data["operation"]
    return _answer(k, op["op"], op["value"], "This element is the one the task needs next.")


def _wrong_index(data: dict[str, Any], choice_ids: list[str], n: int) -> int | None:
    gold = set(data["target"]["element"]) if data["target"] else set()
    return next((i for i, node_id in enumerate(choice_ids) if node_id not in gold), None)


def _first_pick_then_gold(data: dict[str, Any], choice_ids: list[str], n: int) -> int | None:
    return _gold_index(data, choice_ids, n) if n == 0 else None


WEAK_MODES = ("wrong_element", "wrong_action", "none_of_the_above", "no_answer_line", "context_at_once", "context_after_pick")


def weak(req: PolicyRequest) -> PolicyReply:
    data = req.task.data
    mode = WEAK_MODES[stable_choice(req.task.task_id, len(WEAK_MODES))]
    op = data["operation"]
    if mode == "none_of_the_above":
        return PolicyReply(content="Thought: Nothing here looks right.\nAnswer: A.")
    if mode == "no_answer_line":
        return PolicyReply(content="I would probably click something near the top of the page.")
    if mode == "context_at_once":
        return PolicyReply(fail="context_length")
    page = _page_of(req)
    if mode == "wrong_element":
        found = _find_round(data, page, _wrong_index)
        k = _wrong_index(data, found[1], found[0]) if found else None
        return _answer(k, op["op"], op["value"], "Maybe this one.")
    if mode == "wrong_action":  # the right element, but always a click with a made-up value
        found = _find_round(data, page, _gold_index)
        k = _gold_index(data, found[1], found[0]) if found else None
        return _answer(k, "TYPE" if op["op"] == "CLICK" else "CLICK", "something", "This element, I think.")
    # context_after_pick: the first round answers right, the next one overflows
    found = _find_round(data, page, _first_pick_then_gold)
    if found is None or found[0] > 0:
        return PolicyReply(fail="context_length")
    return _answer(_gold_index(data, found[1], 0), op["op"], op["value"], "This one.")


POLICIES: dict[str, Policy] = {"oracle": oracle, "weak": weak}
