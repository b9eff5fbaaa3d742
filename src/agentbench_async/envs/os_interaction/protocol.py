"""The OS environment's conversation: prompt, reply parsing and observations (spec §3–4).

With ``--data-dir`` the wording is AgentBench's own, read from the files ``agentbench data pull`` fetches: text
mode's instruction and one-shot example from v0.2's ``os_interaction/task.py`` (``OSInteraction._judge``,
``ONE_SHOT``), tools mode's system text from FC's ``os_interaction/task.py`` and its tool definitions from FC's
``configs/tasks/os.yaml``. Without it (the built-in suite) the wording is this project's own with the same facts:
three actions (``bash`` with a ```` ```bash ```` block, ``finish``, ``answer(...)``), one per turn, a one-shot
example that counts the entries of ``/etc``, observations prefixed ``The output of the OS:`` and cut at 800
characters (a named deviation, ``os.prompts``/``os.tools``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...environment import Message, ModelReply
from ..reasons import FailureReason
from ..upstream_prompts import FC, V02, fc_tools, upstream_source
from .reasons import no_act_reason

_ACT = re.compile(r"Act:\s*(.+)")
_BASH_BLOCK = re.compile(r"```bash\n(.*?)\n```", re.DOTALL)
TRUNCATED_NOTE = "\n[truncated because the output is too long]"

INSTRUCTION = """You are going to act as a person at a computer, and I will play the Linux (Ubuntu) \
operating system for you. Your goal is to carry out the operations I ask for or to answer my question.

Every turn you first reason, then take exactly ONE action. Choose one of these three forms:

1. To run bash commands, reply:
Think: <your reasoning>

Act: bash

```bash
# the commands to run
```

2. When you think the task is done, reply:
Think: <your reasoning>

Act: finish

3. When you know the answer to the question, reply:
Think: <your reasoning>

Act: answer(<the answer, inside the parentheses>)

If the output of a command is too long, I will cut it off, and what you see is then incomplete: you have to \
cope with that yourself. Your commands must not wait for any interactive input. Again: take only one of \
the three actions in each turn.

"""

ONE_SHOT_QUESTION = 'tell me how many files are in the directory "/etc"?'
_ONE_SHOT: list[Message] = [
    {
        "role": "assistant",
        "content": "Think: First I should look at what /etc contains.\n\nAct: bash\n\n```bash\nls /etc\n```",
    },
    {
        "role": "user",
        "content": "The output of the OS:\ncpi cron.hourly fuse.conf iproute2 lvm networkd-dispatcher "
        "protocols selinux tmpfiles.d [truncated because the output is too long]",
    },
    {
        "role": "assistant",
        "content": "Think: The listing was cut off, so I will count the entries instead.\n\nAct: bash\n\n"
        "```bash\nls -1 /etc | wc -l\n```",
    },
    {"role": "user", "content": "The output of the OS:\n220"},
    {"role": "assistant", "content": "Think: The count is 220, which answers the question.\n\nAct: answer(220)"},
]

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash_action",
            "description": "Run bash commands in the Linux machine's shell and see their output.",
            "parameters": {
                "type": "object",
                "properties": {"script": {"type": "string", "description": "the bash commands to run"}},
                "required": ["script"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "answer_action",
            "description": "Give your answer to the question; this ends the task.",
            "parameters": {
                "type": "object",
                "properties": {"answer": {"type": "string", "description": "the answer"}},
                "required": ["answer"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "finish_action",
            "description": "Say that you have finished the task; this ends it.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]


PROBLEM_LEAD = "Now, my problem is:\n\n"
TASK_LEAD = "Now, I will start a new problem in a new OS. My problem is:\n\n"
UPSTREAM_TASK = "src/server/tasks/os_interaction/task.py"  # v0.2's (instruction, ONE_SHOT) and FC's (system text)
TOOL_NAMES = ("bash_action", "finish_action", "answer_action")  # FC's order
_OWN_TOOLS_INTRO = (
    "You are going to act as a person at a computer, and I will play the Linux (Ubuntu) operating "
    "system for you. Solve the problem below with the tools: bash_action runs commands, finish_action "
    "says the task is done, answer_action gives the answer to the question. Call one tool per turn; "
    "commands must not wait for interactive input; output that is too long is cut off and then "
    "incomplete.\n\nMy problem is:\n\n"
)


@dataclass(frozen=True)
class Prompts:
    """The wording of a run: text mode's instruction and one-shot conversation (question first), tools mode's
    system text (``None``: the project's one user message) and tool definitions."""

    instruction: str
    one_shot: list[Message]
    tools_system: str | None
    tools: list[dict[str, Any]] = field(default_factory=lambda: TOOLS)
    upstream: bool = False  # read from AgentBench's files (--data-dir)
    no_call: str = "Your message called no tool. Call bash_action, answer_action or finish_action."  # tools mode's notices
    invalid_call: str = "That is not one of the tools: call bash_action, answer_action or finish_action."


OWN_PROMPTS = Prompts(INSTRUCTION, [{"role": "user", "content": ONE_SHOT_QUESTION}, *_ONE_SHOT], None)


def load_prompts(data_dir: Path | None, action_mode: str = "text") -> Prompts:
    """AgentBench's wording from the pulled files under ``data_dir`` (v0.2's for text mode, FC's for tools mode),
    else the project's own. A missing or changed file is a one-line TaskFileError naming it."""
    if data_dir is None:
        return OWN_PROMPTS
    if action_mode == "tools":
        fc = upstream_source(data_dir, FC, UPSTREAM_TASK, env="os")
        system = fc.literal("system_message", within="OSInteraction._inject_initial_messages")
        where = "OSInteraction._handle_agent_action"  # its notices: the literal content= of its user and tool messages
        users = [t for t in fc.keyword_arguments(where, "ChatCompletionUserMessageParam", "content") if isinstance(t, str)]
        invalid = [t for t in fc.keyword_arguments(where, "ChatCompletionToolMessageParam", "content") if isinstance(t, str)]
        if not isinstance(system, str) or len(users) != 1 or not invalid:
            raise fc.error("system_message is not a string, or _handle_agent_action sends no no-call and invalid-call notices")
        return Prompts(OWN_PROMPTS.instruction, OWN_PROMPTS.one_shot, system, fc_tools(data_dir, "os", TOOL_NAMES, env="os"), True,
                       users[0], invalid[0])
    v02 = upstream_source(data_dir, V02, UPSTREAM_TASK, env="os")
    injected = v02.call_arguments("OSInteraction._judge", "inject")
    shots = v02.literal("ONE_SHOT")
    if not (isinstance(injected[0], dict) and isinstance(injected[0].get("content"), str)):
        raise v02.error("OSInteraction._judge does not inject the instruction first")
    if not (isinstance(shots, list) and shots and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in shots)):
        raise v02.error("ONE_SHOT is not a list of messages")
    one_shot: list[Message] = [{"role": "assistant" if m.get("role") == "agent" else "user", "content": m["content"]} for m in shots]
    return Prompts(injected[0]["content"], one_shot, None, TOOLS, True)


def first_messages(description: str, action_mode: str, prompts: Prompts = OWN_PROMPTS) -> list[Message]:
    """The conversation's opening, as upstream's ``_judge`` (v0.2, text) or ``_inject_initial_messages`` (FC, tools)
    builds it."""
    if action_mode == "tools":
        if prompts.tools_system is None:
            return [{"role": "user", "content": _OWN_TOOLS_INTRO + description}]
        return [{"role": "system", "content": prompts.tools_system}, {"role": "user", "content": TASK_LEAD + description}]
    question, *shots = prompts.one_shot
    return [
        {"role": "user", "content": prompts.instruction + PROBLEM_LEAD + (question.get("content") or "")},
        *(dict(m) for m in shots),
        {"role": "user", "content": TASK_LEAD + description},
    ]


@dataclass
class Action:
    kind: Literal["bash", "finish", "answer"]
    command: str = ""
    answer: str | None = None

    def describe(self) -> str:
        if self.kind == "bash":
            return "bash: " + self.command
        if self.kind == "answer":
            return f"answer({self.answer})"
        return "finish"


@dataclass
class ParseError:
    status: Literal["invalid_format", "invalid_action"]
    reason: str  # the label of os's reason taxonomy (docs/envs/os.md): stable across runs
    nearest: str | None = None  # what the reply had nearest to the expected line (reasons.py)

    @property
    def error(self) -> str:
        """The episode's error: the reason and the nearest match (``envs/reasons.py``)."""
        return FailureReason(self.reason, self.nearest).error


def parse_text(content: str) -> Action | ParseError:
    """AgentBench's ``extract_action``: the textually last recognised ``Act:`` wins."""
    matches = _ACT.findall(content or "")
    unknown = False
    for raw in reversed(matches):
        act = raw.strip()
        low = act.lower()
        if low.startswith("bash"):
            return Action("bash", command="\n\n".join(_BASH_BLOCK.findall(content)))
        if low.startswith("finish"):
            return Action("finish")
        if low.startswith("answer"):
            rest = act[len("answer") :].strip()
            left, right = rest.find("("), rest.rfind(")")
            if left == -1 or right == -1 or right < left:
                continue
            return Action("answer", answer=rest[left + 1 : right])
        unknown = True
    if unknown:
        return ParseError("invalid_action", "the Act: line names no known action (bash, finish, answer)")
    if matches:
        return ParseError("invalid_format", "answer without parentheses: use Act: answer(<answer>)")
    reason = no_act_reason(content or "")  # what the reply had instead of an Act: line
    return ParseError("invalid_format", reason.label, reason.nearest)


@dataclass
class ToolNotice:
    """Tools mode: a reply AgentBench FC answers without acting (``_handle_agent_action``): the round is used, the
    episode goes on. ``message`` is FC's answer (a user message after a reply without a call, else the call's tool
    message); ``error`` says why for the turn's record."""

    message: Message
    error: str


def parse_tools(reply: ModelReply, prompts: Prompts = OWN_PROMPTS) -> Action | ToolNotice:
    """AgentBench FC's reading of a reply (``_handle_agent_action``, ``_extract_function``): the first call only; its
    arguments' values in order, whatever their names; ``bash_action`` runs the first, ``answer_action`` commits it as
    the answer and so does ``finish_action`` (its thought, FC's commit; none without arguments). No call: FC's user
    notice; unreadable arguments: the error's text as the call's tool message; another function (or a call without the
    value it needs): FC's invalid-call notice."""
    if not reply.tool_calls:
        return ToolNotice({"role": "user", "content": prompts.no_call}, "no tool call in the reply")
    call = reply.tool_calls[0]
    try:
        args = json.loads(call.arguments)
        values = list(args.values())
    except ValueError as exc:
        return ToolNotice(_tool(call.id, str(exc)), f"arguments of {call.name} are not JSON")
    except AttributeError:
        return ToolNotice(_tool(call.id, f"'{type(args).__name__}' object has no attribute 'values'"), f"arguments of {call.name} are not a JSON object")
    if call.name == "finish_action":
        return Action("finish") if not values else Action("answer", answer=_text(values[0]))
    if call.name in ("bash_action", "answer_action") and values and (call.name == "answer_action" or isinstance(values[0], str)):
        return Action("bash", command=values[0]) if call.name == "bash_action" else Action("answer", answer=_text(values[0]))
    return ToolNotice(_tool(call.id, prompts.invalid_call), f"{call.name!r} with {call.arguments[:60]!r} is no call FC runs")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _tool(call_id: str, text: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def observation_text(output: str) -> str:
    if len(output) > 800:
        output = output[:780] + TRUNCATED_NOTE
    if output == "":
        return "The output of the OS is empty."
    return "The output of the OS:\n\n" + output
