"""Mock-model policies for ``alfworld``.

``oracle`` plays the game file's walkthrough (the task's ``walkthrough``, read from the game file)
through the real protocol, one command per reply: text mode ``ACTION: <command>`` (the first reply with
a ``THOUGHT:``), tools mode a ``take_action`` call. Tasks without a walkthrough (official games not
present, or without one) get ``look`` until the turn cap.

``weak`` picks one failure mode per task (from the task id), so a suite shows every status alfworld
ends with: no ``ACTION:`` line (``invalid_format``), an empty action (``invalid_format``), the same
reply again and again (the repeat rule: ``invalid_action``), aimless but varied actions, some unlike any
command (``task_limit_exceeded`` after 35 turns), a full context window (``context_limit_exceeded``).
In tools mode the first two are a message without a tool call and a call with unreadable arguments, which
AgentBench FC answers with a notice: the turns run out (``task_limit_exceeded``).
"""

from __future__ import annotations

import json

from ...environment import Policy, PolicyReply, PolicyRequest, ToolCall, stable_choice
from .prompts import TASK_LEAD


def _turn(req: PolicyRequest) -> int:
    """Replies already given in this episode: assistant messages after the task start (the one-shot
    example before it has assistant turns too). Needs the task start in view (``--history full``)."""
    for index in range(len(req.messages) - 1, -1, -1):
        message = req.messages[index]
        if message.get("role") == "user" and (message.get("content") or "").startswith(TASK_LEAD):
            return sum(1 for m in req.messages[index + 1 :] if m.get("role") == "assistant")
    return req.turn


def _act(req: PolicyRequest, command: str, thought: str | None = None) -> PolicyReply:
    if req.tools:
        call = ToolCall(id=f"call_{req.turn}", name="take_action", arguments=json.dumps({"action": command}))
        return PolicyReply(content=thought or "", tool_calls=[call])
    if thought:
        return PolicyReply(content=f"THOUGHT: {thought}\n ACTION: {command}\n")
    return PolicyReply(content=f"ACTION: {command}\n")


def oracle(req: PolicyRequest) -> PolicyReply:
    walkthrough = req.task.data.get("walkthrough") or []
    turn = _turn(req)
    if turn < len(walkthrough):
        thought = "I know where everything is; I will follow my plan step by step." if turn == 0 else None
        return _act(req, walkthrough[turn], thought)
    return _act(req, "look" if turn % 2 else "inventory")


WEAK_MODES = ("no_action", "empty_action", "repeat", "wander", "context_length")
_WANDER = ("look", "inventory", "dance with the vacuum cleaner", "examine the ceiling")


def weak(req: PolicyRequest) -> PolicyReply:
    mode = WEAK_MODES[stable_choice(req.task.task_id, len(WEAK_MODES))]
    if mode == "no_action":  # text: no ACTION line; tools: no tool call -> invalid_format
        return PolicyReply(content="I think I should look around the room first.")
    if mode == "empty_action":  # text: "ACTION:" with nothing; tools: unreadable arguments
        if req.tools:
            return PolicyReply(tool_calls=[ToolCall(id=f"call_{req.turn}", name="take_action", arguments="{not json")])
        return PolicyReply(content="THOUGHT: I am not sure.\n ACTION:\n")
    if mode == "repeat":  # the same reply four times: the repeat rule ends it at turn 4 -> invalid_action
        return _act(req, "look")
    if mode == "context_length":
        return PolicyReply(fail="context_length")
    return _act(req, _WANDER[_turn(req) % len(_WANDER)])  # never the same three times -> task_limit_exceeded


POLICIES: dict[str, Policy] = {"oracle": oracle, "weak": weak}
