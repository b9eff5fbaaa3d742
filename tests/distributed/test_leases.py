"""The lease protocol between workers and the limit broker, run in one event loop (no Ray): the model's limits hold
whatever the number of workers (in-flight places shared out in blocks, permits counted once per request), places a
worker does not use go back to the others, and a model without rpm/tpm costs the broker nothing per request."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

from agentbench_async.distributed.leases import LeaseChannel, LimitBroker
from agentbench_async.models import ModelConfig


class _Method:
    def __init__(self, fn: Any, sent: Counter[str]) -> None:
        self._fn = fn
        self._sent = sent

    def remote(self, *args: Any) -> asyncio.Task[Any]:
        self._sent[self._fn.__name__] += 1
        return asyncio.ensure_future(self._fn(*args))  # awaitable, or fire-and-forget, as a Ray ObjectRef


class _Handle:
    """A Ray actor handle's calling convention over a local object; ``sent`` counts the calls by method."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self.sent: Counter[str] = Counter()

    def __getattr__(self, name: str) -> _Method:
        return _Method(getattr(self._target, name), self.sent)


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
    await asyncio.sleep(0.01)  # the last places given back travel to the broker
    held = broker.stats()["held"]["m"]
    assert sum(held.values()) <= 2 and all(n <= 1 for n in held.values())  # a worker keeps at most one block (here 1)
    assert broker.granted == 0  # no rpm/tpm: no permit per request


async def test_a_worker_sends_on_its_share_without_asking_for_each_request():
    broker, channels, limits = _channels(2, max_in_flight=64)  # blocks of 4 places

    async def call() -> None:
        async with limits[0].slot(10):
            await asyncio.sleep(0.005)

    for _ in range(5):  # five rounds of 4 requests: the first asks for a block, the others reuse it
        await asyncio.gather(*(call() for _ in range(4)))
    sent = channels[0]._broker.sent
    assert (sent["request"], sent["release"], broker.shared) == (1, 0, 4)


async def test_places_a_worker_does_not_use_go_to_one_that_waits():
    broker, channels, limits = _channels(2, max_in_flight=4)  # blocks of 1 place
    hold = asyncio.Event()
    busy = 0
    peak = 0

    async def call(lim: Any, wait: bool) -> None:
        nonlocal busy, peak
        async with lim.slot(10):
            busy += 1
            peak = max(peak, busy)
            if wait:
                await hold.wait()
            await asyncio.sleep(0.001)
            busy -= 1

    first = [asyncio.ensure_future(call(limits[0], True)) for _ in range(4)]  # worker 0 takes the whole cap and holds it
    await asyncio.sleep(0.02)
    assert sum(broker.stats()["held"]["m"].values()) == 4
    second = [asyncio.ensure_future(call(limits[1], False)) for _ in range(3)]
    await asyncio.sleep(0.02)
    assert not any(t.done() for t in second)  # no place free: worker 1 waits
    hold.set()  # worker 0's requests end; it keeps no free place while worker 1 waits
    await asyncio.wait_for(asyncio.gather(*first, *second), 2.0)
    assert peak <= 4


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


async def test_tokens_per_window_hold_across_workers():
    # 100 tokens per 0.5 s window, requests of 30 tokens (estimated and reported): no window may see more than 3 leave
    broker, channels, limits = _channels(3, tpm=100, rate_window_s=0.5)
    sent: list[float] = []

    async def call(lim: Any) -> None:
        async with lim.slot(30) as slot:
            sent.append(time.monotonic())
            slot.report_usage(30)

    await asyncio.gather(*(call(limits[i % 3]) for i in range(8)))
    sent.sort()
    for i, t in enumerate(sent):
        assert sum(1 for u in sent[i:] if u - t < 0.5) <= 3, "more than 100 tokens within one window"
    assert broker.granted == 8
