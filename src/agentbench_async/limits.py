"""Per-model request limits: requests in flight, requests per minute, tokens per minute, and a
model-wide pause after a 429.

- In flight: a resizable gate. A number is a fixed cap; ``auto`` adapts it (AIMD, for servers that report no
  limits: vLLM, TGI, llama.cpp): doubled each round trip until the first cut, then +1 per round trip while
  latency stays flat; x0.9 at a latency knee (a reply slower than ``KNEE`` times the fastest of the last
  30-60 s: the server queues); x0.5 on 429/503/529 or a timeout; at most one cut per round trip (only replies to requests sent after the last cut count).
- Requests/min: ``asyncio_throttle.Throttler`` (a sliding window of send times: never more than ``rpm``
  requests in any window; its limit follows what the server reports) plus even pacing (one every
  period/rpm seconds). Only one waiter paces at a time (a lock in front), so thousands of
  waiting episodes cost nothing.
- Tokens/min: a sliding-window token budget, charged with an estimate before the call and corrected
  with the usage the server reports.
- ``rpm``/``tpm`` left out (or ``auto``): the limits the server reports in its response headers
  (``rate_headers.py``) are adopted as they arrive, and a request budget the server says is used up holds
  new requests until one is free again; an explicit number always wins.
- 429: ``pause(seconds)`` stops every new request of this model until the pause ends (``Retry-After`` when
  the server sends one), so the whole model slows down, not only the request that was refused.
- Connections: at most ``max_connections`` requests are in flight at once (one HTTP/1.1 connection each; the pool of
  the model's session has the same size), so a request waits here for a connection instead of opening one more. A
  connection the server refuses, or that times out, while the server answers others (``connection_refused``) is
  backpressure: the connections are cut to half of those in use (once per round trip) and new requests pause
  ``BACKPRESSURE_PAUSE_S``; the limit grows back by one per round trip of answers, to one below the connections in use
  at the refusal (after ``BACKPRESSURE_WINDOW_S`` without a refusal: up to ``max_connections`` again).

Time is the event loop's clock (``loop.time()``, which is ``time.monotonic()`` on the standard and uvloop
loops, the Throttler's clock), so a test loop with virtual time drives all of it (the tests give the
Throttler the loop's clock too).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from asyncio_throttle import Throttler

from .rate_headers import read_limits

AUTO = "auto"
AUTO_IN_FLIGHT_START = 8  # where max_in_flight: auto starts
AUTO_IN_FLIGHT_CAP = 256  # and the most it goes to (also the connection pool's size)
KNEE = 1.5  # a reply this many times slower than the fastest recent one means the server is queueing
KNEE_CUT = 0.9  # the in-flight size is cut to this share at a latency knee (the server only queues)
REFUSAL_CUT = 0.5  # and to this one on a refusal (429/503/529) or a timeout (the server is overrun)
FASTEST_WINDOW_S = 30.0
_CUT_STATUSES = frozenset({429, 503, 529})
# The connection pool of a model's server, as the SDKs size theirs: openai-python 1.92.2 and anthropic-sdk-python's
# ``_constants.py`` (DEFAULT_CONNECTION_LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=100)), where a
# request beyond them waits for a free connection (httpx's pool timeout: the whole 600 s timeout)
DEFAULT_MAX_CONNECTIONS = 1000
# a refused or timed-out connection is the server's backpressure when the server answered a request this recently
BACKPRESSURE_WINDOW_S = 30.0
BACKPRESSURE_PAUSE_S = 1.0  # the pause of the model's new requests after such a refusal


def _clock() -> float:
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


def in_flight_cap(max_in_flight: int | str, max_connections: int | None = None) -> int:
    """The most requests ever in flight: the number, or ``AUTO_IN_FLIGHT_CAP`` for ``auto``; at most ``max_connections``
    (each request in flight holds one connection)."""
    cap = AUTO_IN_FLIGHT_CAP if max_in_flight == AUTO else int(max_in_flight)
    return cap if max_connections is None else min(cap, max_connections)


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
                now = _clock()
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


class _Gate:
    """A semaphore whose size can change while requests wait (FIFO)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def try_acquire(self) -> bool:
        """Take a place if one is free and nobody waits (FIFO), without waiting."""
        if self.held < self.limit and not self._waiters:
            self.held += 1
            return True
        return False

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # it was handed a place just before the cancellation
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        self.held -= 1
        self._wake()

    def resize(self, limit: int) -> None:
        self.limit = limit
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.held < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.held += 1
                waiter.set_result(None)


class _Aimd:
    """The in-flight size for ``max_in_flight: auto`` (see the module docstring)."""

    def __init__(self, start: int = AUTO_IN_FLIGHT_START, cap: int = AUTO_IN_FLIGHT_CAP) -> None:
        self.size = float(start)
        self.cap = cap
        # the fastest reply of the current and of the previous FASTEST_WINDOW_S: the server's unloaded latency,
        # forgotten after a while (prompts grow, the server changes)
        self._fastest = [float("inf"), float("inf")]
        self._fastest_since = _clock()
        self._hold_until = -float("inf")
        self._cut_once = False  # slow start (+1 per reply) until the first cut

    def _note_latency(self, latency_s: float) -> float:
        now = _clock()
        if now - self._fastest_since > FASTEST_WINDOW_S:
            self._fastest = [float("inf"), self._fastest[0]]
            self._fastest_since = now
        fastest = min(self._fastest)
        self._fastest[0] = min(self._fastest[0], latency_s)
        return fastest

    def success(self, latency_s: float, sent_at: float) -> None:
        fastest = self._note_latency(latency_s)
        if latency_s > KNEE * fastest:
            self._cut(KNEE_CUT, sent_at, latency_s)
        else:  # before the first cut: +1 per reply (doubling each round trip), then +1 per round trip
            self.size = min(self.cap, self.size + (1.0 / self.size if self._cut_once else 1.0))

    def refused(self, sent_at: float, latency_s: float) -> None:
        self._cut(REFUSAL_CUT, sent_at, latency_s)

    def _cut(self, factor: float, sent_at: float, latency_s: float) -> None:
        # A reply to a request sent before the last cut, or while the queue that caused it drained (about as
        # long as that reply took), says nothing new: one cut per round trip.
        if sent_at >= self._hold_until:
            self.size = max(1.0, self.size * factor)
            fastest = min(self._fastest)  # a refusal comes back at once: hold at least one unloaded round trip
            self._hold_until = _clock() + max(latency_s, KNEE * fastest if fastest < float("inf") else 0.0)
            self._cut_once = True


class ModelLimits:
    """The limits of one model, shared by all its episodes (agent and judge calls alike)."""

    def __init__(
        self,
        *,
        max_in_flight: int | str = 64,
        rpm: int | str | None = None,
        tpm: int | str | None = None,
        window_s: float = 60.0,
        max_connections: int | None = None,
    ) -> None:
        self.max_in_flight = max_in_flight
        self.ended = 0  # requests that ended (answered, refused or failed; not abandoned at Ctrl-C): the live calls/s
        self._aimd = _Aimd() if max_in_flight == AUTO else None
        # connections to the server: at most max_connections, fewer after the server refused some (connection_refused)
        self.max_connections = max_connections
        self._connections = float(max_connections) if max_connections is not None else float("inf")
        self._connections_cut = False  # the limit is below max_connections: it grows back with answers
        self._connections_hold = -float("inf")  # one cut per round trip: refusals of connections opened before it say nothing new
        self._connections_ceiling = float("inf")  # below the connections in use at the last refusal
        self._refused_at = -float("inf")
        self.connection_refusals = 0  # connections refused or timed out while the server answered others (backpressure)
        self.fewest_connections: int | None = None  # the lowest the connection limit was cut to (None: never cut)
        self.answered_at = -float("inf")  # when the server last answered a request (the event loop's clock)
        self._in_flight = _Gate(self._gate_size(self._aimd.size if self._aimd else int(max_in_flight)))
        # The server counts arrivals, we count departures: network jitter can bring two requests closer
        # together on arrival, so keep a small safety margin on the window (2%, at least 100 ms).
        self._period = window_s + max(0.1, 0.02 * window_s)
        self._learn_rpm = not isinstance(rpm, int)
        # Sends before the first answer (when the limit may still come in its headers): the burst a run starts with.
        # A requests/min limit learned later counts them in its window, else a server's sliding window, full of that
        # burst, refuses the paced requests of the window's end (None: no longer recorded).
        self._early: list[float] | None = [] if self._learn_rpm else None
        self._learn_tpm = not isinstance(tpm, int)
        self._requests: Throttler | None = None  # asyncio-throttle: never more than rpm sends in any window
        # Requests are also paced evenly (one every period/rpm seconds): a burst of `rpm` requests at once
        # would reach the server spread out by the client's own send queue and overrun its window.
        self._spacing = 0.0
        self._next_send = 0.0
        self._server_free_at = 0.0  # the server said its request budget is used up until then
        self._throttle_lock = asyncio.Lock()
        self._tokens: _TokenWindow | None = None
        if isinstance(rpm, int):
            self._set_rpm(rpm)
        if isinstance(tpm, int):
            self._tokens = _TokenWindow(tpm, self._period)
        self._paused_until = 0.0
        self.pauses = 0  # how many times a 429 paused this model
        self.learned_from: str | None = None  # openai | anthropic: whose headers set rpm/tpm

    # -- what the limiter paces to now (stored on every model_calls row) --------------------
    @property
    def rpm(self) -> int | None:
        return self._requests.rate_limit if self._requests else None

    @property
    def tpm(self) -> int | None:
        return self._tokens.limit if self._tokens else None

    @property
    def in_flight_limit(self) -> int:
        return self._in_flight.limit

    @property
    def connection_limit(self) -> int | None:
        """The connections to the server now: ``max_connections``, or less after refusals (None: not limited here)."""
        return None if self.max_connections is None else int(self._connections)

    def _gate_size(self, in_flight: float) -> int:
        return int(min(in_flight, self._connections))

    @property
    def in_flight(self) -> int:
        """Requests in flight now (each holds a connection, or is opening one)."""
        return self._in_flight.held

    def connection_refused(self, sent_at: float, in_use: int) -> bool:
        """A connection to the server, asked for at ``sent_at`` with ``in_use`` requests in flight (itself included), was
        refused or timed out. When the server answered a request within ``BACKPRESSURE_WINDOW_S`` it is up but full:
        backpressure (True): fewer connections (half of those in use, once per round trip), new requests pause
        ``BACKPRESSURE_PAUSE_S``, and the limit grows back to one below ``in_use`` at most. Otherwise (False) a failure
        like any other."""
        now = _clock()
        if now - self.answered_at > BACKPRESSURE_WINDOW_S:
            return False
        self.connection_refusals += 1
        ceiling = self._connections_ceiling if now - self._refused_at <= BACKPRESSURE_WINDOW_S else float("inf")
        self._connections_ceiling = float(max(1, min(ceiling, in_use - 1)))  # the server took fewer than in_use
        self._refused_at = now
        if sent_at >= self._connections_hold:
            in_use = self._in_flight.held
            self._connections = float(max(1, min(self._connections, in_use) // 2))
            self._connections_cut = self.max_connections is not None and self._connections < self.max_connections
            self.fewest_connections = min(self.fewest_connections or int(self._connections), int(self._connections))
            self._connections_hold = now + max(now - sent_at, BACKPRESSURE_PAUSE_S)
            self._in_flight.resize(self._gate_size(self._aimd.size if self._aimd else int(self.max_in_flight)))
            self.pause(BACKPRESSURE_PAUSE_S)
        return True

    def _connections_grow(self) -> None:
        """An answer after a cut: one connection more per round trip of answers, up to below where the server last refused
        (that ceiling is forgotten after ``BACKPRESSURE_WINDOW_S`` without a refusal: a server that restarted, or took more
        again), and never above ``max_connections``."""
        top = float(self.max_connections or 0)
        if self.answered_at - self._refused_at <= BACKPRESSURE_WINDOW_S:
            top = min(top, self._connections_ceiling)
        if self._connections < top:
            self._connections = min(top, self._connections + 1.0 / max(self._connections, 1.0))
        self._connections_cut = self._connections < (self.max_connections or 0)
        size = self._gate_size(self._aimd.size if self._aimd else int(self.max_in_flight))
        if size != self._in_flight.limit:
            self._in_flight.resize(size)

    @property
    def counts_tokens(self) -> bool:
        """Whether a request's token estimate is charged (a tokens/min budget is known)."""
        return self._tokens is not None

    def _set_rpm(self, rpm: int) -> None:
        if self._requests is None:
            self._requests = Throttler(rate_limit=rpm, period=self._period, retry_interval=0.005)
            if self._early:  # the sends already made count in the window (asyncio-throttle 1.0.2 keeps them in _task_logs)
                now = _clock()
                self._requests._task_logs.extend(t for t in self._early if now - t <= self._period)
        self._requests.rate_limit = rpm
        self._spacing = self._period / rpm

    # -- what the server said ------------------------------------------------------------------
    def observe(self, status: int | None, headers: Mapping[str, str] | None, latency_s: float, now: float | None = None) -> None:
        """Learn from one answered (``status``) or unanswered (None: timeout, reset) request; ``now``: the event loop's clock
        when the caller has just read it (else read here)."""
        if headers is not None and (self._learn_rpm or self._learn_tpm):
            self._adopt(headers)
        if now is None:
            now = _clock()
        if status is not None:
            self._early = None  # answered: a limit the server reports is known (or it reports none)
            self.answered_at = now
            if self._connections_cut and status == 200:
                self._connections_grow()
        if self._aimd is not None:
            sent_at = now - latency_s
            if status is None or status in _CUT_STATUSES:
                self._aimd.refused(sent_at, latency_s)
            elif status == 200:
                self._aimd.success(latency_s, sent_at)
            self._in_flight.resize(self._gate_size(self._aimd.size))

    def _adopt(self, headers: Mapping[str, str]) -> None:
        limits = read_limits(headers)
        if limits is None:
            return
        self.learned_from = limits.style
        if self._learn_rpm and limits.requests is not None:
            if limits.requests.limit != self.rpm:
                self._set_rpm(limits.requests.limit)
            hold = limits.requests.next_free_s()
            if hold:
                self._server_free_at = max(self._server_free_at, _clock() + hold)
        if self._learn_tpm and limits.tokens is not None:
            if self._tokens is None:
                self._tokens = _TokenWindow(limits.tokens.limit, self._period)
            self._tokens.limit = limits.tokens.limit

    def pause(self, seconds: float) -> None:
        until = _clock() + seconds
        if until > self._paused_until:
            self._paused_until = until
            self.pauses += 1

    async def _wait_pause(self) -> None:
        while (delay := self._paused_until - _clock()) > 0:
            await asyncio.sleep(delay)

    async def _pace(self) -> None:
        async with self._throttle_lock:
            start = now = _clock()
            # a 429's pause set while this request waited here holds it too (not only the requests arriving after)
            while (wait := max(self._next_send - now, self._server_free_at - now, self._paused_until - now)) > 0:
                await asyncio.sleep(wait)
                now = _clock()
            if self._requests is not None:
                await self._requests.acquire()  # waits while the last window already holds rpm sends
                now = _clock()
                if self._paused_until > now:  # paused while it waited for the window
                    await self._wait_pause()
                    now = _clock()
                # schedule from the planned time, not from when the sleep returned: no drift
                self._next_send = (self._next_send if self._next_send > start else now) + self._spacing

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
        # Every call comes here: the clock is read only when a pause or a server's hold was ever set (both start at 0,
        # and the clock is never negative), and a free place is taken without a coroutine.
        lim = self._limits
        if lim._paused_until and lim._paused_until > _clock():  # only after a 429: no coroutine per call otherwise
            await lim._wait_pause()
        if not lim._in_flight.try_acquire():
            await lim._in_flight.acquire()
        try:
            if lim._paused_until and lim._paused_until > _clock():
                await lim._wait_pause()
            if lim._requests is not None or (lim._server_free_at and lim._server_free_at > _clock()):
                await lim._pace()
            if lim._tokens is not None:
                self._charge = await lim._tokens.charge(self._estimate)
            if lim._early is not None:
                lim._early.append(_clock())
        except BaseException:
            lim._in_flight.release()
            raise
        return self

    async def __aexit__(self, kind: object, *exc: object) -> None:
        lim = self._limits
        lim._in_flight.release()
        if kind is not asyncio.CancelledError:
            lim.ended += 1

    def report_usage(self, tokens: int) -> None:
        window = self._limits._tokens
        if window is not None and self._charge is not None and tokens > 0:
            window.correct(self._charge, tokens)
