"""Failure reasons: what an environment's parser saw in a reply it could not use, and what it expected.

An environment that ends an episode for a reply's format names the reason with a fixed label from its own
taxonomy (documented on its page, stable across runs so runs compare) and, where it found one, the nearest
match of what it expected in the reply. The label is stored in ``episodes.details.failure_reason`` and the
episode's ``error`` reads ``<label>; nearest: "<what was found>"``. The ``failure_reasons`` view groups episodes
by label with an example each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

REASON_KEY = "failure_reason"  # episodes.details key holding the label
# episodes.details key: why the task cannot be solved as AgentBench ships it (its set-up defeats it there too); every
# report names these tasks with the reason (the unsolvable_tasks view), and scores count them as upstream does
UNSOLVABLE_KEY = "unsolvable_as_shipped"
_NEAREST_CHARS = 80


@dataclass(frozen=True)
class FailureReason:
    """A label of an environment's taxonomy and, where the parser found one, the nearest match in the reply."""

    label: str
    nearest: str | None = None

    @property
    def error(self) -> str:
        """The episode's ``error``: the label, then the nearest match on one line (cut to 80 characters)."""
        if not self.nearest:
            return self.label
        near = " ".join(self.nearest.split())
        near = near if len(near) <= _NEAREST_CHARS else near[: _NEAREST_CHARS - 1] + "…"
        return f'{self.label}; nearest: "{near}"'

    def add_to(self, details: dict[str, Any]) -> dict[str, Any]:
        """``details`` with the label stored under ``failure_reason``."""
        details[REASON_KEY] = self.label
        return details


EMPTY = "empty reply"
PROSE = "no action line: prose"


def line_of(pattern: re.Pattern[str], content: str) -> str | None:
    """The whole line holding ``pattern``'s first match in ``content``, stripped (None: no match)."""
    match = pattern.search(content)
    if match is None:
        return None
    start, end = content.rfind("\n", 0, match.start()) + 1, content.find("\n", match.end())
    return content[start : end if end >= 0 else len(content)].strip()


def missing_action_reason(content: str, tag_like: re.Pattern[str], tag_label: str) -> FailureReason:
    """A reply whose action line the parser did not find: ``empty reply``; ``tag_label`` with the line when ``tag_like``
    finds one that looks like it (another case, bold, another separator); else ``no action line: prose`` (its first line)."""
    if not content.strip():
        return FailureReason(EMPTY)
    near = line_of(tag_like, content)
    if near is not None:
        return FailureReason(tag_label, near)
    return FailureReason(PROSE, content.strip().splitlines()[0])
