"""The mock model's prompt cache: what OpenAI and Anthropic report in ``usage`` when a request starts with a
prefix they have seen before.

- OpenAI caches automatically: any prefix of 1,024 tokens or more that an earlier request sent is read from
  the cache, in steps of 128 tokens (``usage.prompt_tokens_details.cached_tokens``, part of ``prompt_tokens``;
  with the mock's minimum set below 128, in steps of that minimum).
- Anthropic caches only up to the ``cache_control`` breakpoints a request marks: the longest marked prefix
  seen before is read (``cache_read_input_tokens``), the prefix up to the last breakpoint is written if it is
  new (``cache_creation_input_tokens``), and ``input_tokens`` counts only the rest.

A prefix is identified by the exact content of everything before the cut (tools, system, messages, with the
``cache_control`` markers left out), so one changed byte early in a conversation breaks every later hit, as
on the real servers. Tokens are the mock's usual estimate (characters / 4).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

OPENAI_STEP = 128


@dataclass
class CacheUsage:
    total: int  # prompt tokens
    read: int = 0
    written: int = 0


def _unit_key(unit: Any) -> bytes:
    if isinstance(unit, dict):
        unit = {k: v for k, v in unit.items() if k != "cache_control"}
    return json.dumps(unit, sort_keys=True, separators=(",", ":")).encode()


def _unit_chars(unit: Any) -> int:
    if isinstance(unit, dict):
        if isinstance(unit.get("content"), str):
            return len(unit["content"])
        if isinstance(unit.get("text"), str):
            return len(unit["text"])
        if isinstance(unit.get("content"), list):
            return sum(_unit_chars(b) for b in unit["content"])
    return 0


class PromptCache:
    """Prefix hashes seen so far, per model (the cache is per model on the real servers)."""

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._seen: set[bytes] = set()

    def _prefixes(self, model: str, units: list[tuple[Any, bool]]) -> list[tuple[bytes, int, bool]]:
        """(prefix hash, tokens up to and including the unit, is a breakpoint) per unit."""
        digest = hashlib.sha256(model.encode())
        chars = 0
        out = []
        for unit, marked in units:
            digest.update(_unit_key(unit))
            chars += _unit_chars(unit)
            out.append((digest.copy().digest(), chars // 4, marked))
        return out

    def openai(self, body: dict[str, Any], total: int) -> CacheUsage:
        units: list[tuple[Any, bool]] = [(t, True) for t in body.get("tools") or []]
        units += [(m, True) for m in body.get("messages") or []]
        prefixes = self._prefixes(str(body.get("model", "")), units)
        read = max((tokens for key, tokens, _ in prefixes if key in self._seen and tokens >= self.min_tokens), default=0)
        for key, tokens, _ in prefixes:
            if tokens >= self.min_tokens:
                self._seen.add(key)
        step = min(OPENAI_STEP, self.min_tokens)  # a test may set the minimum below one step
        read = min(read // step * step, total)
        return CacheUsage(total=total, read=read)

    def anthropic(self, body: dict[str, Any], total: int) -> CacheUsage:
        units: list[tuple[Any, bool]] = [(t, "cache_control" in t) for t in body.get("tools") or []]
        system = body.get("system")
        if isinstance(system, str):
            units.append(({"type": "text", "text": system}, False))
        elif isinstance(system, list):
            units += [(b, "cache_control" in b) for b in system]
        for message in body.get("messages") or []:
            content = message.get("content")
            if isinstance(content, str):
                units.append(({"role": message.get("role"), "text": content}, False))
            else:
                units += [({"role": message.get("role"), **b}, "cache_control" in b) for b in content or []]
        marked = [(key, tokens) for key, tokens, is_mark in self._prefixes(str(body.get("model", "")), units) if is_mark]
        read = max((tokens for key, tokens in marked if key in self._seen and tokens >= self.min_tokens), default=0)
        written = 0
        if marked:
            last_key, last_tokens = marked[-1]
            if last_key not in self._seen and last_tokens >= self.min_tokens:
                written = last_tokens - read
        for key, tokens in marked:
            if tokens >= self.min_tokens:
                self._seen.add(key)
        read, written = min(read, total), min(written, max(0, total - read))
        return CacheUsage(total=total, read=read, written=written)
