"""Reading a provider's reply into well-typed values before anything else sees it ("typed at the edge").

Servers send what they send: ``message: null``, content as a dict, a tool call without a name,
``finish_reason: 123``, usage counts of ``1e400`` or ``10**30``, a lone surrogate (``"\\ud800"``) where a
multi-byte character was cut. A ``ReplyReader`` turns a parsed JSON body into the values the engine stores
and the environments parse:

- structure and the fields the episode acts on (the message, its text, ``finish_reason``, tool-call ids,
  names and arguments) have their types, or the reply is **malformed**: ``MalformedReply`` (a model fault,
  retried like a 5xx; after the last retry the episode ends ``model_error`` naming what was wrong);
- counts (usage) are integers from 0 to ``MAX_COUNT``; anything else (negative, fractional, infinite,
  astronomically large, a string) is dropped to null and the call notes it (``model_calls.note``);
- text is valid UTF-8: lone surrogates are replaced with U+FFFD and the call notes it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import RetryableModelError

# No model call reads or writes two billion tokens; a larger count is a server's bug, and keeping counts below
# 2**31 keeps every sum over a run's calls far inside DuckDB's BIGINT.
MAX_COUNT = 2**31 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")


class MalformedReply(RetryableModelError):
    """A 200 reply the client cannot read (wrong structure or field types): retried, then ``model_error``."""


class ReplyReader:
    """Typed readers for one reply body; ``notes`` collects what was repaired or dropped on the way."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def malformed(self, what: str) -> MalformedReply:
        return MalformedReply(f"malformed reply: {what}")

    def mapping(self, value: Any, where: str) -> dict[str, Any]:
        """``value`` as a JSON object, else the reply is malformed."""
        if not isinstance(value, dict):
            raise self.malformed(f"{where} is {_kind(value)}, expected an object")
        return value

    def optional_mapping(self, value: Any, where: str) -> dict[str, Any]:
        """A JSON object, or ``{}`` for a missing/null one; anything else is malformed."""
        return {} if value is None else self.mapping(value, where)

    def items(self, value: Any, where: str, *, required: bool = False) -> list[Any]:
        """A JSON array, or ``[]`` for a missing/null one unless ``required``; anything else is malformed."""
        if value is None and not required:
            return []
        if not isinstance(value, list):
            raise self.malformed(f"{where} is {_kind(value)}, expected a list")
        return value

    def text(self, value: Any, where: str) -> str:
        """A string (null/missing: ``""``) as valid UTF-8; anything else is malformed."""
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.malformed(f"{where} is {_kind(value)}, expected a string")
        return self.clean(value, where)

    def clean(self, value: str, where: str) -> str:
        """``value`` with lone surrogates replaced by U+FFFD (noted)."""
        if value.isascii():
            return value
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            fixed, n = _SURROGATE.subn("\ufffd", value)
            self.notes.append(f"{where}: {n} lone surrogate(s) (not valid UTF-8) replaced with U+FFFD")
            return fixed
        return value

    def name(self, value: Any, where: str) -> str:
        """A non-empty string (a tool's name, a call id); anything else is malformed."""
        if not isinstance(value, str) or not value:
            raise self.malformed(f"{where} is {_kind(value)}, expected a non-empty string")
        return self.clean(value, where)

    def word(self, value: Any, where: str) -> str | None:
        """A string or null (``finish_reason``, ``stop_reason``); anything else is malformed."""
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.malformed(f"{where} is {_kind(value)}, expected a string or null")
        return self.clean(value, where)

    def count(self, value: Any, where: str, *, missing: int | None = 0) -> int | None:
        """A token count: an integer from 0 to ``MAX_COUNT`` (an integral float such as ``12.0`` counts);
        ``missing`` when absent; anything else is dropped to None and noted."""
        if value is None:
            return missing
        if isinstance(value, int) and not isinstance(value, bool):
            number: int | None = value
        elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
            number = int(value)
        else:
            number = None
        if number is None or not 0 <= number <= MAX_COUNT:
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            self.notes.append(f"{where}: {shown} is not a token count (an integer from 0 to {MAX_COUNT}); stored as null")
            return None
        return number

    def note(self) -> str | None:
        """The notes as one line for ``model_calls.note`` (None when nothing was repaired)."""
        return "; ".join(self.notes)[:500] if self.notes else None


def add_counts(*counts: int | None) -> int | None:
    """The sum of counts, None if any of them was dropped."""
    total = 0
    for c in counts:
        if c is None:
            return None
        total += c
    return total


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"[:60]
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
