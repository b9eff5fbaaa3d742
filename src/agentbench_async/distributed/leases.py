"""Cluster-wide model limits: one broker holds every model's limits and leases them to the workers in blocks.

In flight. The broker holds each model's in-flight cap and hands it out in *shares*: a worker whose requests
wait asks for as many places as it lacks (at least a block, ``_block``), the broker grants what is free, and
the worker then sends requests on the places it holds without asking again. A worker gives back what it does
not use: the places beyond one block when none of its requests waits, and every free place while the broker says
another worker waits for some (the model is *short*). The shares never add up to more than the cap, so the
cap holds whatever the number of workers; a lost worker's share goes back to the others (``forget``).

Requests and tokens per minute. A model with ``rpm`` or ``tpm`` also needs a *permit* per request: the broker
keeps that model's ``ModelLimits`` (the same code a local run uses: its sliding window, even pacing and token
budget), makes the permits one after another for a worker's requests that wait (one task per worker and model,
not one per request) and sends them back in batches. A permit is counted when the broker makes it and is used
by the worker within ``LEASE_MAX_AGE_S`` (an older one is thrown away, still counted, and another asked for), so
the broker's window is ``LEASE_SLACK_S`` longer than the model's: requests sent in any window of the model's
length were counted within a window the broker counts. With ``tpm`` a permit is charged the request's estimate
and corrected with the tokens the server reported when the worker hands it back.

429. A pause seen by one worker goes to the broker, which stops making permits and tells every worker through
their long poll: each stops sending that model's requests until the pause ends.

Traffic is batched: a worker sends what accumulated during one turn of its event loop in one message, and one
long-poll call per worker brings back places, permits, shortages and pauses. A model without rpm/tpm costs the
broker nothing per request: only shares change hands.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelError
from ..limits import ModelLimits, _Gate, in_flight_cap
from ..models import ModelConfig

LEASE_SLACK_S = 1.0  # added to each model's rate window at the broker
LEASE_MAX_AGE_S = 0.5  # a permit older than this when the request would leave is not used
_COLLECT_WAIT_S = 10.0  # a long poll returns empty after this long (so a stopped worker's call ends)
_BLOCKS_PER_CAP = 16  # a model's in-flight cap is handed out in blocks of cap/16 places (at least one)


def _block(cap: int) -> int:
    return max(1, cap // _BLOCKS_PER_CAP)


def _rate_limits(model: ModelConfig) -> ModelLimits | None:
    """The broker's rate limits of a model (None: it has neither rpm nor tpm, only its in-flight cap)."""
    if model.rpm is None and model.tpm is None:
        return None
    return ModelLimits(max_in_flight=1_000_000, rpm=model.rpm, tpm=model.tpm, window_s=model.rate_window_s + LEASE_SLACK_S)


@dataclass
class _Pool:
    """One model's in-flight places at the broker."""

    cap: int
    free: int
    held: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # worker -> places it holds
    wanting: deque[list[int]] = field(default_factory=deque)  # [worker, places still wanted], first come first served
    told: set[int] = field(default_factory=set)  # workers told to give back their free places (the pool is short)


@dataclass
class _News:
    """What a worker's next long poll brings back."""

    places: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    permits: list[tuple[int, float]] = field(default_factory=list)  # (permit, made at)
    short: bool = False  # whether a model is short of places changed for this worker


class LimitBroker:
    """The run's model limits, leased to workers (the body of a Ray actor; its methods run on one event loop)."""

    def __init__(self, models: list[ModelConfig]) -> None:
        self._pools = {m.name: _Pool(cap := in_flight_cap(m.max_in_flight), cap) for m in models}
        self._rates = {m.name: limits for m in models if (limits := _rate_limits(m)) is not None}
        self._news: dict[int, _News] = defaultdict(_News)
        self._wake: dict[int, asyncio.Event] = defaultdict(asyncio.Event)
        self._asked: dict[tuple[int, str], deque[tuple[int, int]]] = defaultdict(deque)  # (worker, model) -> (permit, estimate)
        self._making: dict[tuple[int, str], asyncio.Task[None]] = {}
        self._charged: dict[tuple[int, int], Any] = {}  # (worker, permit) -> its slot at the broker (tpm: corrected at release)
        self._paused_until: dict[str, float] = {}
        self._told_pauses: dict[int, dict[str, float]] = defaultdict(dict)  # worker -> the pauses it was told of
        self._pause_counts: dict[str, int] = {m.name: 0 for m in models}
        self._forgotten: set[int] = set()
        self.granted = 0  # permits made
        self.shared = 0  # places handed out (a place is used for many requests)

    # -- in-flight places --------------------------------------------------------------------------
    def _serve(self, model: str) -> None:
        pool = self._pools[model]
        while pool.wanting and pool.free > 0:
            wanted = pool.wanting[0]
            worker, places = wanted
            given = min(places, pool.free)
            pool.free -= given
            pool.held[worker] += given
            self.shared += given
            self._news[worker].places[model] += given
            self._wake[worker].set()
            wanted[1] -= given
            if wanted[1] == 0:
                pool.wanting.popleft()
        # while someone waits, every other holder gives back the places it does not use; told once, and told again
        # when the shortage is over
        waiting = {worker for worker, _ in pool.wanting}
        short = {worker for worker, held in pool.held.items() if held > 0 and worker not in waiting} if waiting else set()
        for worker in short ^ pool.told:
            self._news[worker].short = True
            self._wake[worker].set()
        pool.told = short

    def _short_models(self, worker: int) -> list[str]:
        return sorted(model for model, pool in self._pools.items() if worker in pool.told)

    def _give_back(self, worker: int, model: str, places: int) -> None:
        pool = self._pools[model]
        places = min(places, pool.held.get(worker, 0))
        if places > 0:
            pool.held[worker] -= places
            pool.free += places
            self._serve(model)

    # -- the calls a worker makes --------------------------------------------------------------------
    async def request(self, worker: int, places: list[tuple[str, int]], permits: list[tuple[int, str, int]]) -> None:
        """``places``: (model, how many more in-flight places the worker wants); ``permits``: (permit, model, estimated
        tokens) for models with rpm/tpm. Both come back through ``collect``."""
        if worker in self._forgotten:
            return
        for model, count in places:
            pool = self._pools[model]
            if count > 0:
                pool.wanting.append([worker, max(count, _block(pool.cap))])
            else:  # no longer wanted (the worker's requests got places it gave back meanwhile, or ended)
                pool.wanting = deque(w for w in pool.wanting if w[0] != worker)
            self._serve(model)
        for permit, model, estimate in permits:
            self._asked[(worker, model)].append((permit, estimate))
            key = (worker, model)
            if key not in self._making or self._making[key].done():
                self._making[key] = asyncio.create_task(self._make_permits(worker, model))

    async def _make_permits(self, worker: int, model: str) -> None:
        asked = self._asked[(worker, model)]
        limits = self._rates[model]
        while asked:
            permit, estimate = asked.popleft()
            slot = limits.slot(estimate)
            await slot.__aenter__()  # the model's window, pacing, token budget and pause
            if worker in self._forgotten:
                await slot.__aexit__(None, None, None)
                return
            if limits.counts_tokens:
                self._charged[(worker, permit)] = slot  # corrected with the reported tokens when handed back
            else:
                await slot.__aexit__(None, None, None)  # a request permit is spent when made
            self.granted += 1
            self._news[worker].permits.append((permit, time.monotonic()))
            self._wake[worker].set()

    async def collect(self, worker: int) -> dict[str, Any]:
        """Wait for news for ``worker``: places granted, permits made (with their age), models whose free places are
        wanted elsewhere, and pauses in force (seconds left). Empty after a while without any."""
        wake = self._wake[worker]
        news = self._news[worker]
        if not (news.places or news.permits or news.short or self._new_pauses(worker)):
            try:
                await asyncio.wait_for(wake.wait(), _COLLECT_WAIT_S)
            except asyncio.TimeoutError:
                pass
        wake.clear()
        news = self._news.pop(worker, _News())
        now = time.monotonic()
        pauses = self._new_pauses(worker)
        self._told_pauses[worker].update({model: now + left for model, left in pauses.items()})
        return {"places": dict(news.places), "permits": [(permit, now - at) for permit, at in news.permits],
                "short": self._short_models(worker), "pauses": pauses}  # fmt: skip

    def _new_pauses(self, worker: int) -> dict[str, float]:
        """Pauses in force that ``worker`` was not told of yet (model -> seconds left)."""
        now = time.monotonic()
        told = self._told_pauses[worker]
        return {model: until - now for model, until in self._paused_until.items() if until > now and until > told.get(model, 0.0)}

    async def release(self, worker: int, places: list[tuple[str, int]], permits: list[tuple[int, int]],
                      pauses: list[tuple[str, float]]) -> None:  # fmt: skip
        """Places given back ``(model, how many)``, tpm permits handed back ``(permit, tokens the server reported)``
        and 429 pauses ``(model, seconds)``."""
        for model, seconds in pauses:
            if model in self._rates:
                self._rates[model].pause(seconds)
            until = time.monotonic() + seconds
            if until > self._paused_until.get(model, 0.0):
                self._paused_until[model] = until
                self._pause_counts[model] += 1
                self._told_pauses[worker][model] = until  # it paused itself
                for other in list(self._wake):
                    if other != worker:
                        self._wake[other].set()  # every other worker learns it with its next poll
        for permit, tokens in permits:
            slot = self._charged.pop((worker, permit), None)
            if slot is not None:
                slot.report_usage(tokens)
                await slot.__aexit__(None, None, None)
        for model, count in places:
            self._give_back(worker, model, count)

    async def forget(self, worker: int) -> int:
        """A worker is gone: free everything it held and drop what it asked for. Returns the places and permits freed."""
        self._forgotten.add(worker)
        for (owner, _), task in list(self._making.items()):
            if owner == worker:
                task.cancel()
        freed = 0
        for model, pool in self._pools.items():
            pool.wanting = deque(w for w in pool.wanting if w[0] != worker)
            pool.told.discard(worker)
            held = pool.held.pop(worker, 0)
            pool.free += held
            freed += held
            self._serve(model)
        charged = [permit for owner, permit in self._charged if owner == worker]
        await self.release(worker, [], [(permit, 0) for permit in charged], [])
        self._news.pop(worker, None)
        return freed + len(charged)

    def stats(self) -> dict[str, Any]:
        times = os.times()
        return {
            "granted": self.granted, "shared": self.shared,
            "held": {model: dict(pool.held) for model, pool in self._pools.items()},
            "pauses": dict(self._pause_counts),
            "cpu_seconds": times.user + times.system,
        }  # fmt: skip


class _Share(_Gate):
    """One model's in-flight places held by this worker: the gate's ``limit`` is the places the broker granted, its
    ``held`` the places requests use now."""

    def __init__(self, channel: LeaseChannel, model: str) -> None:
        super().__init__(0)
        self._channel = channel
        self._model = model
        self.asked = 0  # places asked for, not yet granted
        self.short = False  # another worker waits for places of this model: keep none free

    async def acquire(self) -> None:
        if self.held >= self.limit or self._waiters:
            lacking = len(self._waiters) + 1 - (self.limit - self.held) - self.asked
            if lacking > 0:
                self.asked += lacking
                self._channel.ask_places(self._model, lacking)
        await super().acquire()

    def granted(self, places: int) -> None:
        self.asked = max(0, self.asked - places)
        self.resize(self.limit + places)

    def set_short(self, short: bool) -> None:
        self.short = short
        self._wake()

    def fail(self, error: Exception) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self._waiters.clear()

    def _wake(self) -> None:
        """Free places go to this worker's waiting requests; what none needs goes back to the broker (beyond one
        block kept for the next requests, none while another worker waits)."""
        super()._wake()
        if self._waiters:
            return
        if self.asked:  # nothing waits here any more: the places still asked for are not wanted
            self._channel.ask_places(self._model, -self.asked)
            self.asked = 0
        spare = self.limit - self.held - (0 if self.short else self._channel.block(self._model))
        if spare > 0:
            self.limit -= spare
            self._channel.give_back(self._model, spare)


class LeaseChannel:
    """A worker's side of the broker: its shares of in-flight places, permits asked for, one long poll."""

    def __init__(self, broker: Any, worker: int) -> None:
        self._broker = broker
        self._worker = worker
        self._next = 0
        self._shares: dict[str, _Share] = {}
        self._blocks: dict[str, int] = {}
        self._limits: dict[str, list[LeasedLimits]] = defaultdict(list)
        self._waiting: dict[int, asyncio.Future[tuple[float, float]]] = {}
        self._places: dict[str, int] = defaultdict(int)  # more places to ask for, by model
        self._permits: list[tuple[int, str, int]] = []
        self._given: dict[str, int] = defaultdict(int)  # places to give back, by model
        self._spent: list[tuple[int, int]] = []  # tpm permits handed back (permit, tokens)
        self._pauses: list[tuple[str, float]] = []
        self._flush_due = False
        self._collector: asyncio.Task[None] | None = None
        self._broken: str | None = None
        self.stale = 0  # permits thrown away because they were too old

    def limits(self, model: ModelConfig) -> LeasedLimits:
        if model.name not in self._shares:
            self._shares[model.name] = _Share(self, model.name)
            self._blocks[model.name] = _block(in_flight_cap(model.max_in_flight))
        limits = LeasedLimits(self, model)
        self._limits[model.name].append(limits)
        return limits

    def share(self, model: str) -> _Share:
        return self._shares[model]

    def block(self, model: str) -> int:
        return self._blocks[model]

    # -- what the shares and slots ask -----------------------------------------------------------------
    def ask_places(self, model: str, places: int) -> None:
        """``places`` more in-flight places of ``model`` wanted (negative: no longer wanted)."""
        self._check()
        self._places[model] += places
        self._schedule_flush()

    def give_back(self, model: str, places: int) -> None:
        self._given[model] += places
        self._schedule_flush()

    async def permit(self, model: str, estimate: int) -> int:
        """A rate permit for one request of ``model``, fresh enough to be used now."""
        loop = asyncio.get_running_loop()
        while True:
            self._check()
            permit, self._next = self._next, self._next + 1
            made: asyncio.Future[tuple[float, float]] = loop.create_future()
            self._waiting[permit] = made
            self._permits.append((permit, model, estimate))
            self._schedule_flush()
            age, received = await made  # if cancelled, the permit is handed back when it arrives
            if age + (time.monotonic() - received) <= LEASE_MAX_AGE_S:
                return permit
            self.stale += 1
            self.spend(permit, 0)

    def spend(self, permit: int, tokens: int) -> None:
        """A permit used (or thrown away): with tpm, the tokens the server reported correct its charge."""
        self._spent.append((permit, tokens))
        self._schedule_flush()

    def pause(self, model: str, seconds: float) -> None:
        self._pauses.append((model, seconds))
        self._schedule_flush()

    def close(self) -> None:
        if self._collector is not None:
            self._collector.cancel()

    def _check(self) -> None:
        if self._broken is not None:
            raise ModelError(self._broken)
        if self._collector is None or self._collector.done():
            self._collector = asyncio.create_task(self._collect())

    def _schedule_flush(self) -> None:
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        if self._places or self._permits:
            places, self._places = list(self._places.items()), defaultdict(int)
            permits, self._permits = self._permits, []
            self._broker.request.remote(self._worker, places, permits)
        if self._given or self._spent or self._pauses:
            given, self._given = list(self._given.items()), defaultdict(int)
            spent, pauses, self._spent, self._pauses = self._spent, self._pauses, [], []
            self._broker.release.remote(self._worker, given, spent, pauses)

    async def _collect(self) -> None:
        try:
            while True:
                news = await self._broker.collect.remote(self._worker)
                received = time.monotonic()
                for model, seconds in news["pauses"].items():
                    for limits in self._limits.get(model, ()):
                        limits.hold(seconds)
                for model, places in news["places"].items():
                    self._shares[model].granted(places)
                for model, share in self._shares.items():
                    if share.short != (model in news["short"]):
                        share.set_short(model in news["short"])
                for permit, age in news["permits"]:
                    waiter = self._waiting.pop(permit, None)
                    if waiter is None or waiter.done():  # its request was cancelled meanwhile
                        self.spend(permit, 0)
                    else:
                        waiter.set_result((age, received))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the broker is gone: every waiting request fails as a model error
            self._broken = f"the run's limit broker stopped answering ({type(exc).__name__}); the episode is re-run on resume"
            for waiter in self._waiting.values():
                if not waiter.done():
                    waiter.set_exception(ModelError(self._broken))
            self._waiting.clear()
            for share in self._shares.values():
                share.fail(ModelError(self._broken))


class LeasedLimits(ModelLimits):
    """``ModelLimits`` of one model in a worker: places from the worker's share, permits from the broker (with rpm or
    tpm); a pause goes to the broker, which tells every worker."""

    def __init__(self, channel: LeaseChannel, model: ModelConfig) -> None:
        super().__init__(max_in_flight=model.max_in_flight)  # rates are the broker's, never counted here
        self._channel = channel
        self._model = model.name
        self._permitted = model.rpm is not None or model.tpm is not None
        self._charges_tokens = model.tpm is not None

    @property
    def counts_tokens(self) -> bool:
        return self._charges_tokens

    def slot(self, estimated_tokens: int) -> _LeasedSlot:  # type: ignore[override]
        return _LeasedSlot(self, estimated_tokens)

    def pause(self, seconds: float) -> None:
        super().pause(seconds)  # this worker stops at once; the broker tells every other one
        self._channel.pause(self._model, seconds)

    def hold(self, seconds: float) -> None:
        """A pause another worker's 429 started (from the broker)."""
        super().pause(seconds)


class _LeasedSlot:
    __slots__ = ("_limits", "_estimate", "_permit", "_placed", "_tokens")

    def __init__(self, limits: LeasedLimits, estimate: int) -> None:
        self._limits = limits
        self._estimate = estimate
        self._permit: int | None = None
        self._placed = False
        self._tokens = 0

    async def __aenter__(self) -> _LeasedSlot:
        lim = self._limits
        await lim._wait_pause()
        share = lim._channel.share(lim._model)
        await share.acquire()
        self._placed = True
        try:
            await lim._wait_pause()
            if lim._permitted:
                self._permit = await lim._channel.permit(lim._model, self._estimate)
        except BaseException:
            self._placed = False
            share.release()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        lim = self._limits
        if self._permit is not None and lim._charges_tokens:
            lim._channel.spend(self._permit, self._tokens)
        if self._placed:
            lim._channel.share(lim._model).release()

    def report_usage(self, tokens: int) -> None:
        self._tokens = tokens
