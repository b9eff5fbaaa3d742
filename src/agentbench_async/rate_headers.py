"""The rate limits a provider reports on its responses, read into one shape.

- OpenAI (platform.openai.com/docs/guides/rate-limits, "Rate limits in headers"): ``x-ratelimit-limit-requests``,
  ``x-ratelimit-remaining-requests``, ``x-ratelimit-reset-requests`` and the same three for ``-tokens``; a reset is
  a duration until the limit "resets to its initial state" ("1s", "6m0s", "20ms", "1h2m3.5s").
- Anthropic (docs.anthropic.com/en/api/rate-limits, "Response headers"): ``anthropic-ratelimit-requests-limit``,
  ``-remaining``, ``-reset`` and the same for ``tokens``, ``input-tokens`` and ``output-tokens``; a reset is an
  RFC 3339 time when the limit is fully replenished. Both providers refill continuously (a token bucket).

Both resets therefore say when the bucket is full again: from (limit, remaining, reset) the refill rate is
``(limit - remaining) / reset`` per second, so the next unit is free after ``reset / (limit - remaining)``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class Budget:
    """One limit as the server reported it: ``limit`` per window, ``remaining`` now, full again in ``reset_s``."""

    limit: int
    remaining: int | None
    reset_s: float | None

    def next_free_s(self) -> float:
        """Seconds until one more unit is free (0 when some remain)."""
        if self.remaining is None or self.remaining > 0 or not self.reset_s:
            return 0.0
        return self.reset_s / max(1, self.limit - self.remaining)


@dataclass(frozen=True)
class ServerLimits:
    """The limits in one response's headers (``style``: openai | anthropic)."""

    style: str
    requests: Budget | None
    tokens: Budget | None  # Anthropic: the most restrictive token limit (tokens, else input-tokens)


def parse_duration(value: str) -> float | None:
    """A Go-style duration as OpenAI sends it ("1s", "6m0s", "20ms", "1h2m3.5s"; a bare number is seconds)."""
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def parse_rfc3339(value: str, wall_now: float) -> float | None:
    """Seconds from ``wall_now`` (Unix seconds) until an RFC 3339 time ("2025-01-15T14:24:00Z"); never negative."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    if at.tzinfo is None:
        return None
    return max(0.0, at.timestamp() - wall_now)


def _int(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    if value is None:
        return None
    try:
        number = int(float(value))
    except ValueError:
        return None
    return number if number >= 0 else None  # Azure sends -1 for "not reported"


def _budget(headers: Mapping[str, str], limit: str, remaining: str, reset: str, read_reset: Callable[[str], float | None]) -> Budget | None:
    cap = _int(headers, limit)
    if not cap:
        return None
    raw_reset = headers.get(reset)
    return Budget(cap, _int(headers, remaining), read_reset(raw_reset) if raw_reset else None)


# The headers that say a response carries OpenAI's or Anthropic's limits (read on every answer: no string built per call)
_OPENAI_LIMITS = ("x-ratelimit-limit-requests", "x-ratelimit-limit-tokens")
_ANTHROPIC_LIMITS = ("anthropic-ratelimit-requests-limit", "anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-input-tokens-limit")


def read_limits(headers: Mapping[str, str], wall_now: float | None = None) -> ServerLimits | None:
    """The limits in ``headers`` (case-insensitive mapping, as aiohttp's), or None when the server sends none."""
    if any(map(headers.__contains__, _OPENAI_LIMITS)):
        def read(name: str) -> Budget | None:
            return _budget(headers, f"x-ratelimit-limit-{name}", f"x-ratelimit-remaining-{name}", f"x-ratelimit-reset-{name}", parse_duration)

        return ServerLimits("openai", read("requests"), read("tokens"))
    if any(map(headers.__contains__, _ANTHROPIC_LIMITS)):
        wall = time.time() if wall_now is None else wall_now

        def read_a(name: str) -> Budget | None:
            p = f"anthropic-ratelimit-{name}-"
            return _budget(headers, p + "limit", p + "remaining", p + "reset", lambda v: parse_rfc3339(v, wall))

        return ServerLimits("anthropic", read_a("requests"), read_a("tokens") or read_a("input-tokens"))
    return None
