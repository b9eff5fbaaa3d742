"""Mock-model policies for ``os``.

``oracle`` plays the task's reference solution: for a ``match`` task it answers the expected string;
otherwise it runs ``evaluation.example`` in the shell (as ``bash -c`` from ``/``, exactly like the
checker will, so process counts agree) and answers with its output, or says ``finish`` when the
example only changes the system. ``weak`` picks one failure mode per task. ``idle`` does nothing: it answers
at once with an empty answer (a task that asks for one) or says ``finish`` (a task that asks for a change), the
floor no task's grading should pass (``bench/os_grading_audit.py``).
"""

from __future__ import annotations

import json
import re
import shlex

from ...environment import Policy, PolicyReply, PolicyRequest, ToolCall, stable_choice

_OUTPUT = re.compile(r"^The output of the OS:\n\n(.*)$", re.DOTALL)


def _bash(req: PolicyRequest, command: str, think: str = "I will run the reference commands.") -> PolicyReply:
    if req.tools:
        args = json.dumps({"script": command})
        return PolicyReply(tool_calls=[ToolCall(id=f"call_{req.turn}", name="bash_action", arguments=args)])
    return PolicyReply(content=f"Think: {think}\n\nAct: bash\n\n```bash\n{command}\n```")


def _answer(req: PolicyRequest, answer: str) -> PolicyReply:
    if req.tools:
        args = json.dumps({"answer": answer})
        return PolicyReply(tool_calls=[ToolCall(id=f"call_{req.turn}", name="answer_action", arguments=args)])
    return PolicyReply(content=f"Think: I have the answer.\n\nAct: answer({answer})")


def _finish(req: PolicyRequest) -> PolicyReply:
    if req.tools:
        return PolicyReply(tool_calls=[ToolCall(id=f"call_{req.turn}", name="finish_action", arguments="{}")])
    return PolicyReply(content="Think: The change is made.\n\nAct: finish")


def _last_output(req: PolicyRequest) -> str:
    last = req.messages[-1].get("content") or "" if req.messages else ""
    m = _OUTPUT.match(last)
    return m.group(1) if m else ""


def _my_actions(req: PolicyRequest) -> int:
    """Actions this policy took in the current episode (the one-shot example does not count)."""
    n = 0
    for msg in req.messages:
        if msg.get("role") == "assistant" and (msg.get("tool_calls") or "```bash" in (msg.get("content") or "")):
            n += 1
    return n - (0 if req.tools else 2)


def oracle(req: PolicyRequest) -> PolicyReply:
    data = req.task.data
    if "match" in data and "answer" in data["match"]:
        return _answer(req, data["match"]["answer"])
    example = data.get("example")
    if example is None:
        return _finish(req)
    if _my_actions(req) == 0:
        if "check" in data and None in data["check"]:
            prog = "python3" if example["language"] == "python" else "bash"
            return _bash(req, f"cd / && {prog} -c {shlex.quote(example['code'])}")
        if example["language"] == "python":
            return _bash(req, f"python3 -c {shlex.quote(example['code'])}")
        return _bash(req, example["code"])
    lines = [ln for ln in _last_output(req).strip().splitlines() if ln.strip()]
    if "check" in data and None not in data["check"] and not lines:
        return _finish(req)
    return _answer(req, lines[-1].strip() if lines else "")


def weak(req: PolicyRequest) -> PolicyReply:
    """One failure mode per task (chosen from the task id), so a suite shows every status."""
    mode = stable_choice(req.task.task_id, 6)
    if mode == 0:
        return _answer(req, "42 files, probably")  # completed, wrong
    if mode == 1:
        return PolicyReply(content="I believe the answer is 42.")  # invalid_format: no Act line
    if mode == 2:
        if req.tools:
            return PolicyReply(tool_calls=[ToolCall(id=f"call_{req.turn}", name="python_action", arguments="{}")])
        return PolicyReply(content="Think: maybe python.\n\nAct: python\n\n```python\nprint(1)\n```")  # invalid_action
    if mode == 3:
        return _bash(req, "ls /", think="Let me look around again.")  # task_limit_exceeded after 8 turns
    if mode == 4:
        return PolicyReply(fail="context_length")  # context_limit_exceeded
    return _finish(req)  # completed with the system unchanged (fails check tasks, fails match tasks)


def idle(req: PolicyRequest) -> PolicyReply:
    """Acts on nothing: an empty answer where the task wants one, else ``finish`` with the system as the task left it."""
    data = req.task.data
    wants_answer = "match" in data or ("check" in data and None in data["check"])
    return _answer(req, "") if wants_answer else _finish(req)


POLICIES: dict[str, Policy] = {"oracle": oracle, "weak": weak, "idle": idle}
