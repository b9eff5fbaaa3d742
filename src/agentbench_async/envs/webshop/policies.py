"""Mock-model policies for ``webshop``.

``oracle`` plays the goal's reference purchase through the real protocol, reading each page it is shown:
``search[<target title>]``, ``next >`` until the target is listed (at most 5 pages), ``click[<ASIN>]``, one
click per reference option, ``click[Buy Now]``. Text mode writes ``Thought: ... Action: ...`` replies;
tools mode calls ``search_action``/``click_action``.

``weak`` picks one failure mode per task (from the task id): buy the first search hit without options
(``completed`` with a partial reward), a reply without an action or with ``click [x]`` (``invalid_format``;
in tools mode: no tool call, an unknown tool or unreadable arguments, which use up the rounds), clicks on
things that are not on the page and hostile searches until the rounds run out (``task_limit_exceeded``),
and a full context window (``context_limit_exceeded``).
"""

from __future__ import annotations

import ast
import json
from typing import Any

from ...environment import Policy, PolicyReply, PolicyRequest, ToolCall, stable_choice
from .protocol import ACTION_RE

MAX_PAGES = 5
_MARK = "Available Actions:\n"


def _available(req: PolicyRequest) -> dict[str, Any]:
    """The actions of the page shown last (the environment writes the dict with Python's str())."""
    for msg in reversed(req.messages):
        content = msg.get("content") or ""
        if msg.get("role") in ("user", "tool") and _MARK in content:
            value = ast.literal_eval(content.rpartition(_MARK)[2].strip())
            return value if isinstance(value, dict) else {}
    return {}


def _sent(req: PolicyRequest) -> list[str]:
    """The actions this policy sent earlier in the episode (after the one-shot example)."""
    first_real = 0
    for i, msg in enumerate(req.messages):
        if msg.get("role") in ("user", "tool") and (msg.get("content") or "").startswith(("Observation:\nWebShop", "The initial")):
            first_real = i
            break
    out: list[str] = []
    for msg in req.messages[first_real:]:
        if msg.get("role") != "assistant":
            continue
        for call in msg.get("tool_calls") or []:
            fn = call.get("function", {})
            verb = "search" if fn.get("name") == "search_action" else "click"
            try:
                args = json.loads(fn.get("arguments") or "{}")
                out.append(f"{verb}[{next(iter(args.values()))}]")
            except (ValueError, StopIteration, AttributeError):
                out.append("?")
        match = ACTION_RE.search(msg.get("content") or "")
        if match:
            out.append(match.group(1))
    return out


def _reply(req: PolicyRequest, action: str, thought: str) -> PolicyReply:
    if req.tools:
        verb, _, rest = action.partition("[")
        name, key = ("search_action", "keywords") if verb == "search" else ("click_action", "value")
        args = json.dumps({key: rest[:-1]}, ensure_ascii=False)
        return PolicyReply(content="", tool_calls=[ToolCall(id=f"call_{req.turn}", name=name, arguments=args)])
    return PolicyReply(content=f"Thought:\nI think {thought}.\n\nAction:\n{action}")


def oracle(req: PolicyRequest) -> PolicyReply:
    ref = req.task.data["reference"]
    asin = ref["asin"]
    sent = _sent(req)
    clickables = [str(c) for c in _available(req).get("clickables", [])]
    if not sent:
        return _reply(req, f"search[{ref['search']}]", "I should search for the product by its name")
    if asin.lower() in clickables:
        return _reply(req, f"click[{asin}]", "the product I want is listed, so I will open it")
    if "buy now" in clickables:
        opened = max(i for i, a in enumerate(sent) if a.lower() == f"click[{asin.lower()}]")
        clicked = {a[6:-1] for a in sent[opened + 1 :]}
        for value in ref["options"]:
            if value not in clicked:
                return _reply(req, f"click[{value}]", f"I need the option {value!r}")
        return _reply(req, "click[Buy Now]", "the product and its options match the instruction")
    pages = sum(1 for a in sent if a == "click[next >]")
    if "next >" in clickables and pages < MAX_PAGES - 1:
        return _reply(req, "click[next >]", "the product is not on this page, so I will look at the next one")
    return _reply(req, "click[back to search]", "I cannot find the product")


WEAK_MODES = ("buy_first_hit", "no_action", "bad_syntax", "missing_buttons", "hostile", "context_full")


def weak(req: PolicyRequest) -> PolicyReply:
    mode = WEAK_MODES[stable_choice(req.task.task_id, len(WEAK_MODES))]
    goal = req.task.data["goal"]
    sent = _sent(req)
    clickables = [str(c) for c in _available(req).get("clickables", [])]
    if mode == "buy_first_hit":
        if not sent:
            words = " ".join(goal["instruction_text"].split()[:6])
            return _reply(req, f"search[{words}]", "a few words of the instruction will do")
        if "buy now" in clickables:
            return _reply(req, "click[Buy Now]", "this one looks fine")
        hits = [c for c in clickables if c not in ("back to search", "next >", "< prev")]
        if hits:
            return _reply(req, f"click[{hits[0]}]", "the first result is good enough")
        return _reply(req, "click[back to search]", "nothing found")
    if mode == "no_action":
        if req.tools:
            return PolicyReply(content="I would rather think about it first.")
        return PolicyReply(content="Thought:\nI think I should look for it somewhere.")
    if mode == "bad_syntax":
        if req.tools:
            if req.turn % 2:
                return PolicyReply(content="", tool_calls=[ToolCall(id=f"call_{req.turn}", name="checkout", arguments="{}")])
            return PolicyReply(content="", tool_calls=[ToolCall(id=f"call_{req.turn}", name="search_action", arguments="{broken")])
        return PolicyReply(content="Thought:\nI think I will buy it.\n\nAction: click [Buy Now]")
    if mode == "missing_buttons":
        return _reply(req, "click[Add to Cart]", "there must be a cart button")
    if mode == "hostile":
        attempts = [
            "search[<a> " + "x" * 2000 + "]",
            "click[search]",
            "click[b000000000]",
            "search[<r>]",
            "search[../../etc/passwd; DROP TABLE products; {{7*7}} ${HOME}]",
            "click[buy now]" if "buy now" not in clickables else "click[description]",
        ]
        return _reply(req, attempts[len(sent) % len(attempts)], "I will test the site")
    return PolicyReply(fail="context_length")


POLICIES: dict[str, Policy] = {"oracle": oracle, "weak": weak}
