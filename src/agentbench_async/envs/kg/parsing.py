"""Reading model replies the way AgentBench v0.2 does (spec §3), with the recommended fixes.

Text mode: keep what precedes the first ``Observation:``, unescape ``\\_``; a ``Final Answer: #k`` (or
``Find Answer``) wins; otherwise the first line starting with ``Action`` is the action. Arguments come
from ``name(…)`` up to the first ``)`` split on commas — except that known entity names (which may hold
``,``, ``(`` or ``)``, e.g. ``Salt, Smoke and Silver``) are matched against the raw text first.
"""

from __future__ import annotations

import re

FINAL_ANSWER = re.compile(r"(?:Find|Final) Answer: #(\d+)")
_ACTION_LINE = re.compile(r"Action.*?:")
_CALL_NAMES = re.compile(r"(\w+)\(")
_SPLIT = re.compile(r"\s*,\s*")


def clean_reply(text: str) -> str:
    return text.split("Observation:")[0].replace("\\_", "_")


def final_answer_id(text: str) -> int | None:
    found = FINAL_ANSWER.findall(text)
    return int(found[0]) if found else None


def action_line(text: str) -> str | None:
    """The first line that starts with ``Action…:``, or None."""
    for line in text.split("\n"):
        if _ACTION_LINE.match(line):
            return line
    return None


def call_names(line: str) -> list[str]:
    """Candidate tool names on the line, in order, each once."""
    return list(dict.fromkeys(_CALL_NAMES.findall(line)))


def _first_call_span(line: str, name: str) -> tuple[int, int] | None:
    """Span of the arguments of the first ``name(…)``: what upstream's lazy ``name\\((.+?)\\)`` regex finds,
    in linear time (that regex is quadratic on a long line without a closing parenthesis)."""
    at = line.find(name + "(")
    if at < 0:
        return None
    start = at + len(name) + 1
    end = line.find(")", start + 1)
    if end < 0:
        return None
    return start, end


def call_arguments(line: str, name: str, entity_names: list[str]) -> list[str] | None:
    """The raw argument strings of ``name(...)`` in ``line``; None when there is no ``name(…)`` to read."""
    span = _first_call_span(line, name)
    if span is None:
        return None
    start, end = span
    special = sorted((n for n in entity_names if any(c in n for c in ",()") and n in line[start:]), key=len, reverse=True)
    if not special:
        return _SPLIT.split(line[start:end])
    # A name with a comma or parenthesis: read up to the call's closing parenthesis after the names.
    text = line[start:]
    placeholders: dict[str, str] = {}
    for i, entity in enumerate(special):
        token = f"\x00{i}\x00"
        if entity in text:
            text = text.replace(entity, token)
            placeholders[token] = entity
    end = text.find(")")
    if end < 0:
        return None
    parts = _SPLIT.split(text[:end])
    for token, entity in placeholders.items():
        parts = [p.replace(token, entity) for p in parts]
    return parts


def strip_variable_word(argument: str) -> str:
    return argument.replace("variable ", "").replace("Variable ", "")
