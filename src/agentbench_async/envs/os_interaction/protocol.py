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


OWN_PROMPTS = Prompts(INSTRUCTION, [{"role": "user", "content": ONE_SHOT_QUESTION}, *_ONE_SHOT], None)


def load_prompts(data_dir: Path | None, action_mode: str = "text") -> Prompts:
    """AgentBench's wording from the pulled files under ``data_dir`` (v0.2's for text mode, FC's for tools mode),
    else the project's own. A missing or changed file is a one-line TaskFileError naming it."""
    if data_dir is None:
        return OWN_PROMPTS
    if action_mode == "tools":
        fc = upstream_source(data_dir, FC, UPSTREAM_TASK, env="os")
        system = fc.literal("system_message", within="OSInteraction._inject_initial_messages")
        if not isinstance(system, str):
            raise fc.error("system_message is not a string")
        return Prompts(OWN_PROMPTS.instruction, OWN_PROMPTS.one_shot, system, fc_tools(data_dir, "os", TOOL_NAMES, env="os"), True)
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


def parse_tools(reply: ModelReply) -> Action | ParseError:
    if not reply.tool_calls:
        return ParseError("invalid_format", "no tool call in the reply")
    call = reply.tool_calls[0]
    try:
        args = json.loads(call.arguments or "{}")
    except ValueError:
        return ParseError("invalid_format", f"arguments of {call.name} are not JSON")
    if not isinstance(args, dict):
        return ParseError("invalid_format", f"arguments of {call.name} are not a JSON object")
    if call.name == "bash_action":
        if not isinstance(args.get("script"), str):
            return ParseError("invalid_format", "bash_action needs a 'script' string")
        return Action("bash", command=args["script"])
    if call.name == "answer_action":
        if "answer" not in args:
            return ParseError("invalid_format", "answer_action needs an 'answer'")
        value = args["answer"]
        return Action("answer", answer=value if isinstance(value, str) else json.dumps(value))
    if call.name == "finish_action":
        return Action("finish")
    return ParseError("invalid_action", f"unknown tool {call.name!r} (use bash_action, answer_action or finish_action)")


def observation_text(output: str) -> str:
    if len(output) > 800:
        output = output[:780] + TRUNCATED_NOTE
    if output == "":
        return "The output of the OS is empty."
    return "The output of the OS:\n\n" + output
