"""The OS environment's conversation: prompt, reply parsing and observations (spec §3–4).

The wording is this project's own; the facts are AgentBench's: three actions (``bash`` with a
```` ```bash ```` block, ``finish``, ``answer(...)``), one per turn, a one-shot example that counts
the entries of ``/etc``, observations prefixed ``The output of the OS:`` and cut at 800 characters.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from ...environment import Message, ModelReply

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


def first_messages(description: str, action_mode: str) -> list[Message]:
    if action_mode == "tools":
        intro = (
            "You are going to act as a person at a computer, and I will play the Linux (Ubuntu) operating "
            "system for you. Solve the problem below with the tools: bash_action runs commands, finish_action "
            "says the task is done, answer_action gives the answer to the question. Call one tool per turn; "
            "commands must not wait for interactive input; output that is too long is cut off and then "
            "incomplete.\n\nMy problem is:\n\n" + description
        )
        return [{"role": "user", "content": intro}]
    return [
        {"role": "user", "content": INSTRUCTION + "Now, my problem is:\n\n" + ONE_SHOT_QUESTION},
        *_ONE_SHOT,
        {"role": "user", "content": "Now, I will start a new problem in a new OS. My problem is:\n\n" + description},
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
    reason: str


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
    return ParseError("invalid_format", "no 'Act:' line in the reply")


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
