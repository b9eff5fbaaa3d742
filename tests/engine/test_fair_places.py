"""Many models fairly (issue 33): the run's places (``max_concurrency``, an environment's capacity) go to the waiting
model holding the fewest, so a model whose server is slow never holds the others back, and the models' results grow
together."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine_support import echo_config, query, run, start_mock

from agentbench_async.places import FairPlaces


async def test_a_slow_model_does_not_hold_the_places_of_a_fast_one(tmp_path: Path) -> None:
    fast, slow = await start_mock(latency_ms=50), await start_mock(latency_ms=1000)
    out = tmp_path / "fair.duckdb"
    models = [{"name": "fast", "model": "mock-oracle", "base_url": fast.base_url},
              {"name": "slow", "model": "mock-oracle", "base_url": slow.base_url}]  # fmt: skip
    try:
        await run(echo_config(out, fast.base_url, models=models, limit=12, max_concurrency=2))
    finally:
        await fast.stop()
        await slow.stop()
    ends = dict(query(out, "SELECT model, epoch(max(finished_at)) - epoch((SELECT min(started_at) FROM episodes)) FROM episodes "
                           "GROUP BY 1"))  # fmt: skip
    assert query(out, "SELECT model, count(*) FROM episodes WHERE status = 'completed' GROUP BY 1 ORDER BY 1") == [("fast", 12), ("slow", 12)]
    # the fast model keeps one of the two places: its 12 episodes of two 50 ms calls end in about 1.2 s, not behind the
    # slow model's 2 s episodes (a FIFO semaphore let the slow one take both places: the fast one ended with it, ~12 s)
    assert ends["fast"] < 6 and ends["slow"] > 2 * ends["fast"], ends


async def test_a_freed_place_goes_to_the_waiting_model_holding_fewest() -> None:
    places = FairPlaces(2)
    a, b = places.for_model("a"), places.for_model("b")
    await a.acquire()
    await a.acquire()  # a holds both (nobody else asked)
    got: list[str] = []

    async def take(view, name: str) -> None:  # type: ignore[no-untyped-def]
        await view.acquire()
        got.append(name)

    waiting = [asyncio.create_task(take(a, "a")), asyncio.create_task(take(b, "b"))]  # a asked first
    await asyncio.sleep(0)
    assert a.locked() and b.locked() and got == []
    a.release()
    await asyncio.sleep(0)
    assert got == ["b"]  # b holds none, a still one: b's turn though a asked first
    a.release()
    await asyncio.gather(*waiting)
    assert got == ["b", "a"]

    # a waiter cancelled leaves no trace: the next one takes the place at once
    c = places.for_model("c")
    stuck = asyncio.create_task(c.acquire())
    await asyncio.sleep(0)
    stuck.cancel()
    await asyncio.gather(stuck, return_exceptions=True)
    b.release()
    await asyncio.wait_for(c.acquire(), 1)
