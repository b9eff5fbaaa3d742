"""The few-shot prompt of a Mind2Web round and the question text.

A prompt file is AgentBench's format: a JSON array of 7 ``{"role", "content"}`` messages, three worked
examples (``user`` page + question, ``agent`` answer) and a final ``user`` message with empty content
that each round fills with ``'''\\n<page>\\n'''\\n\\n<question>``. Role ``agent`` is sent as ``assistant``.

The question's wording (the line introducing the task, the ``Task:`` label, the previous-actions header,
the instruction to pick a choice and the "none of the above" option) is read from the file's first
example, so a round asks in exactly the words its examples use: the official files
(``<data-dir>/mind2web/prompt/llm_prompt_cot.json``, used by v0.2, or ``llm_prompt.json`` without
``Thought:`` lines) and the project's own (``environments/mind2web/prompt/``, written in our words).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...environment import Message, TaskFileError, read_json
from .protocol import PREVIOUS_K

PROMPT_FILES = {"cot": "llm_prompt_cot.json", "plain": "llm_prompt.json"}
N_MESSAGES = 7
NO_PREVIOUS = "None"  # shown when a step has no previous actions (upstream's placeholder)
PAGE_QUOTE = "'''"


@dataclass(frozen=True)
class Wording:
    intro: str  # "…complete the following task:"
    task_label: str  # "Task: "
    previous_header: str  # "Previous actions:"
    instruction: str  # "What should be the next action? … A. 'None of the above'):"
    none_option: str  # "None of the above"
    no_previous: str = NO_PREVIOUS


@dataclass(frozen=True)
class FewShot:
    """A loaded prompt file: the six example messages and the question wording."""

    path: Path
    examples: tuple[Message, ...]
    wording: Wording


def prompt_path(folder: Path, variant: str) -> Path:
    """``folder`` is AgentBench's data root, its ``mind2web`` folder, or a folder holding ``prompt/``."""
    for base in (folder / "mind2web" / "prompt", folder / "prompt", folder):
        if (base / PROMPT_FILES[variant]).is_file():
            return base / PROMPT_FILES[variant]
    return folder / "mind2web" / "prompt" / PROMPT_FILES[variant]


def wording_of(user_text: str, where: str) -> Wording:
    """Read the question wording back from an example user turn (page block, then the question)."""
    head, sep, question = user_text.rpartition(PAGE_QUOTE)
    lines = question.lstrip("\n").split("\n")
    try:
        blank = lines.index("", 3)
    except ValueError:
        blank = -1
    if not sep or PAGE_QUOTE not in head or blank < 4 or len(lines) <= blank + 1 or not lines[blank + 1].startswith("A. "):
        raise TaskFileError(
            f"{where}: an example user turn must be '''<page>''' then the question: a line, 'Task: …', the "
            "previous-actions header, the actions, the instruction, a blank line and 'A. …' choices"
        )
    label, _, _ = lines[1].partition(" ")
    previous = lines[3 : blank - 1]
    no_previous = previous[0] if len(previous) == 1 and "->" not in previous[0] else NO_PREVIOUS
    return Wording(
        intro=lines[0],
        task_label=label + " ",
        previous_header=lines[2],
        instruction=lines[blank - 1],
        none_option=lines[blank + 1][3:],
        no_previous=no_previous,
    )


def load_prompt(path: Path) -> FewShot:
    raw = read_json(path, missing=f"{path}: prompt file not found (AgentBench's data/mind2web/prompt/{path.name})")
    if not isinstance(raw, list) or len(raw) != N_MESSAGES:
        raise TaskFileError(f"{path}: must be a JSON array of {N_MESSAGES} messages (3 examples as user/agent pairs, then an empty user slot)")
    examples: list[Message] = []
    for i, msg in enumerate(raw):
        expected = "user" if i % 2 == 0 else "agent"
        if not isinstance(msg, dict) or msg.get("role") not in (expected, "assistant" if expected == "agent" else expected):
            raise TaskFileError(f"{path}: message {i} must have role {expected!r}")
        if not isinstance(msg.get("content"), str):
            raise TaskFileError(f"{path}: message {i} needs a string 'content'")
        if i < N_MESSAGES - 1:
            examples.append({"role": "user" if expected == "user" else "assistant", "content": msg["content"]})
    wording = wording_of(examples[0]["content"], f"{path}: message 0")
    return FewShot(path=path, examples=tuple(examples), wording=wording)


def question(w: Wording, data: dict[str, Any], choices: tuple[tuple[str, str], ...]) -> str:
    """The question under the page: task, the last ``PREVIOUS_K`` actions, the lettered choices."""
    text = f"{w.intro}\n{w.task_label}{data['confirmed_task']}\n{w.previous_header}\n"
    previous = data["previous_actions"][-PREVIOUS_K:]
    text += "".join(f"{a}\n" for a in previous) if previous else f"{w.no_previous}\n"
    text += f"{w.instruction}\n\nA. {w.none_option}\n"
    text += "".join(f"{chr(ord('B') + i)}. {label}\n" for i, (_, label) in enumerate(choices))
    return text


def round_messages(few_shot: FewShot, page: str, question_text: str) -> list[Message]:
    """The whole conversation of one round (a fresh one each round, as upstream)."""
    final: Message = {"role": "user", "content": f"{PAGE_QUOTE}\n{page}\n{PAGE_QUOTE}\n\n{question_text}"}
    return [dict(m) for m in few_shot.examples] + [final]  # type: ignore[misc]
