"""Mock-model policies for the ``echo`` environment."""

from __future__ import annotations

import re

from ...environment import Policy, PolicyReply, PolicyRequest, ToolCall, stable_choice

_ASK = re.compile(r"Repeat this number: (\d+)")


def _current(req: PolicyRequest) -> str:
    for msg in reversed(req.messages):
        match = _ASK.search(msg.get("content") or "")
        if match:
            return match.group(1)
    return "0"


def _answer(req: PolicyRequest, value: str) -> PolicyReply:
    if req.tools:
        return PolicyReply(tool_calls=[ToolCall(id=f"call_{req.turn}", name="answer", arguments=f'{{"value": {value}}}')])
    return PolicyReply(content=f"ANSWER: {value}")


def oracle(req: PolicyRequest) -> PolicyReply:
    return _answer(req, _current(req))


def weak(req: PolicyRequest) -> PolicyReply:
    """One failure mode per task, chosen from the task id, so a suite shows every status."""
    mode = stable_choice(req.task.task_id, 6)
    if mode == 0:
        return _answer(req, _current(req))  # right
    if mode == 1:
        return _answer(req, str(int(_current(req)) + 1))  # wrong -> completed, score 0
    if mode == 2:
        return PolicyReply(content="I think the number is " + _current(req))  # invalid_format
    if mode == 3:
        return PolicyReply(content="ANSWER: seven")  # invalid_action
    if mode == 4:
        return PolicyReply(fail="context_length")  # context_limit_exceeded
    return PolicyReply(content="Let me think about it. ANSWER:")  # invalid_format (empty answer)


POLICIES: dict[str, Policy] = {"oracle": oracle, "weak": weak}
