"""Per-model request limits: requests in flight, requests per minute, tokens per minute, and a
model-wide pause after a 429.

- In flight: an ``asyncio.Semaphore``.
- Requests/min: ``asyncio_throttle.Throttler`` (a sliding window of send times: never more than ``rpm``
  requests in any window). Only one waiter polls it at a time (a lock in front), so thousands of waiting
  episodes cost nothing.
- Tokens/min: a sliding-window token budget, charged with an estimate before the call and corrected
  with the usage the server reports.
- 429: ``pause(seconds)`` stops every new request of this model until the pause ends (``Retry-After`` when
  the server sends one), so the whole model slows down, not only the request that was refused.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass

from asyncio_throttle import Throttler


@dataclass
class _Charge:
    at: float
    tokens: int


class _TokenWindow:
    """At most ``limit`` tokens charged in any ``window_s`` seconds."""

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit = limit
        self.window_s = window_s
        self._charges: deque[_Charge] = deque()
        self._used = 0
        self._lock = asyncio.Lock()

    def _expire(self, now: float) -> None:
        while self._charges and now - self._charges[0].at >= self.window_s:
            self._used -= self._charges.popleft().tokens

    async def charge(self, tokens: int) -> _Charge:
        async with self._lock:
            while True:
                now = time.monotonic()
                self._expire(now)
                # A request larger than the whole budget still goes, alone, so it cannot wait forever.
                if self._used + tokens <= self.limit or not self._charges:
                    charge = _Charge(now, tokens)
                    self._charges.append(charge)
                    self._used += tokens
                    return charge
                await asyncio.sleep(max(0.001, self._charges[0].at + self.window_s - now))

    def correct(self, charge: _Charge, actual: int) -> None:
        """Replace an estimate by the reported usage (if the charge is still inside the window)."""
        if charge in self._charges:
            self._used += actual - charge.tokens
        charge.tokens = actual


class ModelLimits:
    """The limits of one model, shared by all its episodes (agent and judge calls alike)."""

    def __init__(
        self,
        *,
        max_in_flight: int = 64,
        rpm: int | None = None,
        tpm: int | None = None,
        window_s: float = 60.0,
    ) -> None:
        self.max_in_flight = max_in_flight
        self._in_flight = asyncio.Semaphore(max_in_flight)
        # The server counts arrivals, we count departures: network jitter can bring two requests closer
        # together on arrival, so keep a small safety margin on the window (2%, at least 100 ms).
        period = window_s + max(0.1, 0.02 * window_s)
        self._throttler = Throttler(rate_limit=rpm, period=period, retry_interval=0.005) if rpm else None
        # Requests are also paced evenly (one every period/rpm seconds): a burst of `rpm` requests at once
        # would reach the server spread out by the client's own send queue and overrun its window.
        self._spacing = period / rpm if rpm else 0.0
        self._next_send = 0.0
        self._throttle_lock = asyncio.Lock()
        self._tokens = _TokenWindow(tpm, period) if tpm else None
        self._paused_until = 0.0
        self.pauses = 0  # how many times a 429 paused this model

    def pause(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        if until > self._paused_until:
            self._paused_until = until
            self.pauses += 1

    async def _wait_pause(self) -> None:
        while (delay := self._paused_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def slot(self, estimated_tokens: int) -> _Slot:
        """``async with limits.slot(n) as slot``: hold one request slot; ``slot.report_usage(tokens)`` after."""
        return _Slot(self, estimated_tokens)


class _Slot:
    """One admitted request (a plain async context manager: this is on every call's path)."""

    __slots__ = ("_limits", "_estimate", "_charge")

    def __init__(self, limits: ModelLimits, estimate: int) -> None:
        self._limits = limits
        self._estimate = estimate
        self._charge: _Charge | None = None

    async def __aenter__(self) -> _Slot:
        lim = self._limits
        if lim._paused_until > time.monotonic():  # only after a 429: no coroutine per call otherwise
            await lim._wait_pause()
        await lim._in_flight.acquire()
        try:
            if lim._paused_until > time.monotonic():
                await lim._wait_pause()
            if lim._throttler is not None:
                async with lim._throttle_lock:
                    start = time.monotonic()
                    if lim._next_send > start:
                        await asyncio.sleep(lim._next_send - start)
                    await lim._throttler.acquire()
                    # schedule from the planned time, not from when the sleep returned: no drift
                    lim._next_send = max(lim._next_send, start) + lim._spacing
            if lim._tokens is not None:
                self._charge = await lim._tokens.charge(self._estimate)
        except BaseException:
            lim._in_flight.release()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._limits._in_flight.release()

    def report_usage(self, tokens: int) -> None:
        window = self._limits._tokens
        if window is not None and self._charge is not None and tokens > 0:
            window.correct(self._charge, tokens)
