"""History policies: which part of an episode's conversation is sent to the model each turn.

``agentbench`` (the default) is AgentBench v0.2's rule, applied to every task: always keep the first
message; then add messages newest first while the running total of "segments" stays under 3,500; if the
oldest kept message is a user message, drop it (so the kept tail starts with the model's turn); when messages were left out, append
``[NOTICE] <n> messages are omitted.`` to the first message. A segment is a run of up to 7 letters, or
any single character that is not a letter, space or newline. In tools mode, tool results left at the
head of the kept tail without their assistant call are dropped as well.

A conversation that opens with system text (tools mode's [system, user task], AgentBench FC's layout) keeps
the system messages and the task after them whole, as the first message is kept in v0.2: the task always
reaches the model (v0.2's rule applied as is would drop the only user message from the kept tail). The rest is
cut by the same budget, counting the kept head; the notice goes on the first (system) message. ``keep`` widens
the head: the engine passes the length of a tools-mode episode's opening (FC's kg sends a one-shot conversation
between the system text and the task), so the task is never cut however long the episode grows.

``full`` (an opt-in, recorded as not comparable to the paper) sends everything: an overflow is then a
``context_limit_exceeded`` outcome rather than a shortened prompt.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Literal

from .types import Message

HistoryPolicy = Literal["full", "agentbench"]
AGENTBENCH_SEGMENT_BUDGET = 3500


def count_segments(text: str) -> int:
    """AgentBench's length measure for the history budget."""
    return _count_remembered(text) if len(text) <= _REMEMBERED_LENGTH else _count(text)


def _count(text: str) -> int:
    if text.isascii():  # the common case: one regex match per segment, no Python loop per character
        return len(_ASCII_SEGMENT.findall(text))
    segments = 0
    run = 0  # letters in the current word piece
    for char in text:
        if char.isalpha():
            run += 1
            if run == 7:
                segments += 1
                run = 0
        else:
            if run:
                segments += 1
                run = 0
            if char not in (" ", "\n"):
                segments += 1
    return segments + (1 if run else 0)


# On ASCII text str.isalpha() is [A-Za-z]; a greedy {1,7} splits a run of letters as the rule does.
_ASCII_SEGMENT = re.compile(r"[A-Za-z]{1,7}|[^A-Za-z \n]")

# Every turn counts the messages of the conversation again, and the episodes of an environment share their instructions
# and examples: the whole test split of all eight environments counted 12.3 M characters in 28,033 calls, of which 2,170
# different texts of 1.1 M characters. The counts of the last 4,096 texts up to 16,384 characters are kept (at most 64 M
# characters held, ~1 M in that run).
_REMEMBERED_LENGTH = 16384
_count_remembered = functools.lru_cache(maxsize=4096)(_count)


def _full(messages: list[Message], keep: int = 1) -> list[Message]:
    return messages


def _head_length(messages: list[Message], keep: int) -> int:
    """How many leading messages are always sent: the first one (v0.2's instruction), or, when the conversation
    opens with system text (AgentBench FC's layout: [system, user task]), the system messages and the first
    message after them (the task); at least ``keep`` (never more than there are)."""
    head = 0
    while head < len(messages) - 1 and messages[head].get("role") == "system":
        head += 1
    return min(len(messages), max(head + 1, keep))


def _agentbench(messages: list[Message], keep: int = 1) -> list[Message]:
    if not messages:
        return messages
    head = _head_length(messages, keep)
    kept: list[Message] = []
    if sum(len(m.get("content") or "") for m in messages) < AGENTBENCH_SEGMENT_BUDGET:
        # each segment covers at least one character: a conversation shorter than the budget in
        # characters keeps every message (no count needed)
        kept.extend(reversed(messages[head:]))
    else:
        total = sum(count_segments(m.get("content") or "") for m in messages[:head])
        for message in reversed(messages[head:]):
            total += count_segments(message.get("content") or "")
            if total >= AGENTBENCH_SEGMENT_BUDGET:
                break
            kept.append(message)
    # In tools mode a kept tail may start with results of tool calls whose assistant message was dropped:
    # providers refuse such orphans, so they go too (text mode has no tool messages: AgentBench's rule).
    while kept and kept[-1].get("role") == "tool":
        kept.pop()
    if kept and kept[-1].get("role") == "user" and messages[head - 1].get("role") == "user":
        kept.pop()
    first: Message = {**messages[0]}
    omitted = len(messages) - len(kept) - head
    if omitted > 0:
        first["content"] = (first.get("content") or "") + f"\n\n[NOTICE] {omitted} messages are omitted."
    kept.extend(reversed(messages[1:head]))
    kept.append(first)
    kept.reverse()
    return kept


_POLICIES: dict[str, Callable[..., list[Message]]] = {"full": _full, "agentbench": _agentbench}


def history_policy(name: str) -> Callable[..., list[Message]]:
    """The policy ``name``: ``shape(messages, keep=1)`` -> the messages to send (``keep``: leading messages always kept)."""
    return _POLICIES[name]


POLICY_NAMES: tuple[str, ...] = tuple(_POLICIES)
