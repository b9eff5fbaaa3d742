"""The mock's hidden limits, as the providers enforce and report them.

- ``RequestBucket``: a requests-per-minute limit as a token bucket (capacity ``rpm``, refilled continuously:
  how both OpenAI and Anthropic describe their limits). Over it: 429 with ``retry-after``. Every answer carries
  the provider's headers (``rate_headers.py`` documents them): OpenAI's ``x-ratelimit-*-requests`` with a
  Go-style duration until the bucket is full ("1s", "6m0s", "20ms"); Anthropic's ``anthropic-ratelimit-requests-*``
  with the RFC 3339 time it is full. ``headers="none"`` enforces the limit without saying so.
- ``Saturation``: a self-hosted server without headers (vLLM, TGI, llama.cpp): ``capacity`` requests are
  served at once, more wait in a queue (latency climbs), and beyond ``queue_limit`` waiting it refuses (429,
  as TGI's "Model is overloaded"). Its throughput is ``capacity / service time`` requests a second.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TypeVar

HEADER_STYLES = ("openai", "anthropic", "none")
T = TypeVar("T")


def go_duration(seconds: float) -> str:
    """A duration as OpenAI's headers write it: "20ms", "1s", "1.5s", "6m0s", "1h2m3s"."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    return f"{int(minutes)}m{text}" if minutes else text


def rfc3339(unix_s: float) -> str:
    """A time as Anthropic's headers write it ("2025-01-15T14:24:00Z"), rounded up to the second."""
    return datetime.fromtimestamp(int(unix_s) + (unix_s % 1 > 0), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RequestBucket:
    rpm: int
    headers: str = "openai"  # openai | anthropic | none
    window_s: float = 60.0
    _level: float = field(default=-1.0, repr=False)
    _at: float = field(default=0.0, repr=False)

    def admit(self, now: float, wall_now: float) -> tuple[bool, dict[str, str]]:
        """Whether a request arriving at ``now`` (a monotonic clock) goes through, and the headers of its answer."""
        rate = self.rpm / self.window_s
        self._level = float(self.rpm) if self._level < 0 else min(float(self.rpm), self._level + (now - self._at) * rate)
        self._at = now
        allowed = self._level >= 1
        if allowed:
            self._level -= 1
        out = self._headers(wall_now, (self.rpm - self._level) / rate)
        if not allowed:
            out["retry-after"] = str(max(1, round((1 - self._level) / rate)))  # whole seconds, as both providers send
        return allowed, out

    def _headers(self, wall_now: float, full_in_s: float) -> dict[str, str]:
        remaining = str(int(self._level))
        if self.headers == "openai":
            return {"x-ratelimit-limit-requests": str(self.rpm), "x-ratelimit-remaining-requests": remaining,
                    "x-ratelimit-reset-requests": go_duration(full_in_s)}  # fmt: skip
        if self.headers == "anthropic":
            return {"anthropic-ratelimit-requests-limit": str(self.rpm), "anthropic-ratelimit-requests-remaining": remaining,
                    "anthropic-ratelimit-requests-reset": rfc3339(wall_now + full_in_s)}  # fmt: skip
        return {}


class Saturation:
    """``capacity`` requests served at once, ``queue_limit`` more waiting; beyond that refused."""

    def __init__(self, capacity: int, queue_limit: int) -> None:
        self.capacity = capacity
        self.queue_limit = queue_limit
        self._serving = asyncio.Semaphore(capacity)
        self._inside = 0

    async def serve(self, work: Callable[[], Awaitable[T]]) -> T | None:
        """Run ``work`` in a serving slot, or None at once when the queue is full."""
        if self._inside >= self.capacity + self.queue_limit:
            return None
        self._inside += 1
        try:
            async with self._serving:
                return await work()
        finally:
            self._inside -= 1
