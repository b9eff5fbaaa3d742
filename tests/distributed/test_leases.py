"""The lease protocol between workers and the limit broker, run in one event loop (no Ray): every request a
worker makes is counted once in the model's limits, whatever the number of workers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentbench_async.distributed.leases import LeaseChannel, LimitBroker
from agentbench_async.models import ModelConfig


class _Method:
    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def remote(self, *args: Any) -> asyncio.Task[Any]:
        return asyncio.ensure_future(self._fn(*args))  # awaitable, or fire-and-forget, as a Ray ObjectRef


class _Handle:
    """A Ray actor handle's calling convention over a local object."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> _Method:
        return _Method(getattr(self._target, name))


def _channels(n: int, **model: Any) -> tuple[LimitBroker, list[LeaseChannel], list[Any]]:
    config = ModelConfig(name="m", **model)
    broker = LimitBroker([config])
    channels = [LeaseChannel(_Handle(broker), i) for i in range(n)]
    return broker, channels, [c.limits(config) for c in channels]


async def test_in_flight_limit_holds_across_workers():
    broker, channels, limits = _channels(3, max_in_flight=2)
    now = peak = 0

    async def call(lim: Any) -> None:
        nonlocal now, peak
        async with lim.slot(10):
            now += 1
            peak = max(peak, now)
            await asyncio.sleep(0.01)
            now -= 1

    await asyncio.gather(*(call(limits[i % 3]) for i in range(30)))
    assert peak == 2  # three workers, ten calls each, never more than two at once in total
    assert broker.granted == 30
    await asyncio.sleep(0.01)  # the last releases travel to the broker
    assert broker.stats()["held"] == 0


async def test_requests_per_window_hold_across_workers():
    # 10 requests per 0.5 s window for the model, 3 workers sending 15 requests in total: no 0.5 s window
    # may see more than 10 of them leave
    broker, channels, limits = _channels(3, rpm=10, rate_window_s=0.5)
    sent: list[float] = []

    async def call(lim: Any) -> None:
        async with lim.slot(10):
            sent.append(time.monotonic())

    await asyncio.gather(*(call(limits[i % 3]) for i in range(15)))
    sent.sort()
    for i, t in enumerate(sent):
        assert sum(1 for u in sent[i:] if u - t < 0.5) <= 10, "more than 10 requests left within one window"


async def test_a_429_pause_seen_by_one_worker_stops_the_others():
    broker, channels, limits = _channels(2)
    limits[0].pause(0.3)  # worker 0 got a 429 with Retry-After: 0.3
    await asyncio.sleep(0.01)  # the pause reaches the broker with the next flush
    start = time.monotonic()
    async with limits[1].slot(10):  # worker 1 saw no 429 itself
        waited = time.monotonic() - start
    assert waited >= 0.25
    assert broker.stats()["pauses"] == {"m": 1}


async def test_a_lost_worker_gives_its_leases_back():
    broker, channels, limits = _channels(2, max_in_flight=1)
    held = limits[0].slot(10)
    await held.__aenter__()  # worker 0 holds the only slot, then dies without handing it back
    waiting = asyncio.ensure_future(limits[1].slot(10).__aenter__())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert await broker.forget(0) == 1
    await asyncio.wait_for(waiting, 1.0)  # worker 1 gets the slot the lost worker held
