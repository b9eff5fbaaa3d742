"""Cluster-wide model limits: one broker holds every model's limits, workers lease each request from it.

The broker (a Ray actor on the driver's node) keeps one ``ModelLimits`` per model, the same code a local
run uses: requests in flight, requests/min (sliding window, evenly paced), tokens/min and the model-wide
pause after a 429. A worker's HTTP attempt holds a *lease*: the broker entered that model's slot for it and
leaves it when the worker hands the lease back (with the tokens the server reported). So the totals hold
whatever the number of workers, and a 429 seen by any worker pauses the model for all of them.

Traffic is batched: a worker sends the requests and releases that accumulated during one turn of its event
loop in one message each, and one long-poll call per worker brings the grants back as they are made.

A grant is counted when the broker makes it, the request leaves the worker a little later. The broker's
rate window is therefore ``LEASE_SLACK_S`` longer than the model's, and a worker uses a grant only within
``LEASE_MAX_AGE_S`` of it being made (an older one is handed back unused and asked for again): requests
sent in any window of the model's length were granted within a window the broker counts.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

from ..errors import ModelError
from ..limits import ModelLimits, in_flight_cap
from ..models import ModelConfig

LEASE_SLACK_S = 1.0  # added to each model's rate window at the broker
LEASE_MAX_AGE_S = 0.5  # a grant older than this when the request would leave is not used
_COLLECT_WAIT_S = 10.0  # a long poll returns empty after this long (so a stopped worker's call ends)


def _broker_limits(model: ModelConfig) -> ModelLimits:
    return ModelLimits(max_in_flight=in_flight_cap(model.max_in_flight), rpm=model.rpm, tpm=model.tpm, window_s=model.rate_window_s + LEASE_SLACK_S)


class LimitBroker:
    """The run's model limits, leased to workers (the body of a Ray actor; its methods run on one event loop)."""

    def __init__(self, models: list[ModelConfig]) -> None:
        self._limits = {m.name: _broker_limits(m) for m in models}
        self._held: dict[tuple[int, int], Any] = {}  # (worker, lease) -> the entered slot
        self._ready: dict[int, list[tuple[int, float]]] = defaultdict(list)  # worker -> [(lease, granted at)]
        self._wake: dict[int, asyncio.Event] = defaultdict(asyncio.Event)
        self._granting: dict[int, dict[int, asyncio.Task[None]]] = defaultdict(dict)
        self._forgotten: set[int] = set()
        self.granted = 0

    async def request(self, worker: int, requests: list[tuple[int, str, int]]) -> None:
        """Start granting ``(lease, model, estimated tokens)`` requests; grants come back through ``collect``."""
        if worker in self._forgotten:
            return
        for lease, model, estimate in requests:
            self._granting[worker][lease] = asyncio.create_task(self._grant(worker, lease, model, estimate))

    async def _grant(self, worker: int, lease: int, model: str, estimate: int) -> None:
        slot = self._limits[model].slot(estimate)
        try:
            await slot.__aenter__()
        finally:
            self._granting[worker].pop(lease, None)
        if worker in self._forgotten:  # granted just as its worker was declared gone
            await slot.__aexit__(None, None, None)
            return
        self._held[(worker, lease)] = slot
        self.granted += 1
        self._ready[worker].append((lease, time.monotonic()))
        self._wake[worker].set()

    async def collect(self, worker: int) -> list[tuple[int, float]]:
        """Wait for grants of ``worker``: ``[(lease, seconds since granted)]`` (empty after a while without any)."""
        wake = self._wake[worker]
        if not self._ready[worker]:
            try:
                await asyncio.wait_for(wake.wait(), _COLLECT_WAIT_S)
            except asyncio.TimeoutError:
                return []
        wake.clear()
        ready, self._ready[worker] = self._ready[worker], []
        now = time.monotonic()
        return [(lease, now - at) for lease, at in ready]

    async def release(self, worker: int, releases: list[tuple[int, int]], pauses: list[tuple[str, float]]) -> None:
        """Leases handed back ``(lease, tokens the server reported)`` and 429 pauses ``(model, seconds)``."""
        for model, seconds in pauses:
            self._limits[model].pause(seconds)
        for lease, tokens in releases:
            slot = self._held.pop((worker, lease), None)
            if slot is not None:
                slot.report_usage(tokens)
                await slot.__aexit__(None, None, None)

    async def forget(self, worker: int) -> int:
        """A worker is gone: free everything it held and drop its pending requests. Returns leases freed."""
        self._forgotten.add(worker)
        for task in list(self._granting.pop(worker, {}).values()):
            task.cancel()
        held = [key for key in self._held if key[0] == worker]
        await self.release(worker, [(lease, 0) for _, lease in held], [])
        self._ready.pop(worker, None)
        return len(held)

    def stats(self) -> dict[str, Any]:
        return {"granted": self.granted, "held": len(self._held), "pauses": {m: lim.pauses for m, lim in self._limits.items()}}


class LeaseChannel:
    """A worker's side of the broker: batches requests and releases, one long poll for grants."""

    def __init__(self, broker: Any, worker: int) -> None:
        self._broker = broker
        self._worker = worker
        self._next = 0
        self._waiting: dict[int, asyncio.Future[tuple[float, float]]] = {}
        self._requests: list[tuple[int, str, int]] = []
        self._releases: list[tuple[int, int]] = []
        self._pauses: list[tuple[str, float]] = []
        self._flush_due = False
        self._collector: asyncio.Task[None] | None = None
        self._broken: str | None = None
        self.stale = 0  # grants handed back unused because they were too old

    def limits(self, model: ModelConfig) -> LeasedLimits:
        return LeasedLimits(self, model)

    async def acquire(self, model: str, estimate: int) -> int:
        """A lease for one request of ``model``, fresh enough to be used now."""
        loop = asyncio.get_running_loop()
        while True:
            if self._broken is not None:
                raise ModelError(self._broken)
            lease, self._next = self._next, self._next + 1
            granted: asyncio.Future[tuple[float, float]] = loop.create_future()
            self._waiting[lease] = granted
            self._requests.append((lease, model, estimate))
            self._schedule_flush()
            if self._collector is None or self._collector.done():
                self._collector = asyncio.create_task(self._collect())
            age, received = await granted  # if cancelled, the grant is handed back when it arrives
            if age + (time.monotonic() - received) <= LEASE_MAX_AGE_S:
                return lease
            self.stale += 1
            self.release(lease, 0)

    def release(self, lease: int, tokens: int) -> None:
        self._releases.append((lease, tokens))
        self._schedule_flush()

    def pause(self, model: str, seconds: float) -> None:
        self._pauses.append((model, seconds))
        self._schedule_flush()

    def close(self) -> None:
        if self._collector is not None:
            self._collector.cancel()

    def _schedule_flush(self) -> None:
        if not self._flush_due:
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        if self._requests:
            batch, self._requests = self._requests, []
            self._broker.request.remote(self._worker, batch)
        if self._releases or self._pauses:
            releases, pauses, self._releases, self._pauses = self._releases, self._pauses, [], []
            self._broker.release.remote(self._worker, releases, pauses)

    async def _collect(self) -> None:
        try:
            while self._waiting:
                grants = await self._broker.collect.remote(self._worker)
                received = time.monotonic()
                for lease, age in grants:
                    waiter = self._waiting.pop(lease, None)
                    if waiter is None or waiter.done():  # its request was cancelled meanwhile
                        self.release(lease, 0)
                    else:
                        waiter.set_result((age, received))
        except Exception as exc:  # noqa: BLE001 - the broker is gone: every waiting request fails as a model error
            self._broken = f"the run's limit broker stopped answering ({type(exc).__name__}); the episode is re-run on resume"
            for waiter in self._waiting.values():
                if not waiter.done():
                    waiter.set_exception(ModelError(self._broken))
            self._waiting.clear()


class LeasedLimits(ModelLimits):
    """``ModelLimits`` of one model in a worker: every slot is a lease from the broker, pauses go to it."""

    def __init__(self, channel: LeaseChannel, model: ModelConfig) -> None:
        super().__init__(max_in_flight=model.max_in_flight)  # rates are the broker's, never counted here
        self._channel = channel
        self._model = model.name

    def slot(self, estimated_tokens: int) -> _LeasedSlot:  # type: ignore[override]
        return _LeasedSlot(self, estimated_tokens)

    def pause(self, seconds: float) -> None:
        super().pause(seconds)  # this worker stops at once; the broker stops every worker
        self._channel.pause(self._model, seconds)


class _LeasedSlot:
    __slots__ = ("_limits", "_estimate", "_lease", "_tokens")

    def __init__(self, limits: LeasedLimits, estimate: int) -> None:
        self._limits = limits
        self._estimate = estimate
        self._lease: int | None = None
        self._tokens = 0

    async def __aenter__(self) -> _LeasedSlot:
        lim = self._limits
        await lim._wait_pause()
        self._lease = await lim._channel.acquire(lim._model, self._estimate)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._lease is not None:
            self._limits._channel.release(self._lease, self._tokens)

    def report_usage(self, tokens: int) -> None:
        self._tokens = tokens
